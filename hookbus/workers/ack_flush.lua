-- hookbus: settle what a chain worker answered while its ownership lease held (ack_ledger.py).
--
-- Answers on that path were sent as a bare XADD to the producer's inbox; their XACKs and
-- their decision-log records wait in the worker and come here together, every ~100 ms:
-- one XACK for all of them and one decision-log entry holding the records (b, n). An
-- entry is acknowledged exactly when its record is logged, so a worker that dies before a
-- flush leaves both to the reclaimer, which finds the answer in the producer's inbox.
-- Only entries still pending for this worker are acknowledged and logged: a worker that was
-- stopped long enough for its lease to lapse may have had some taken over (and logged,
-- from the reply, by the worker that took them), and must not log them a second time.
--
-- KEYS[1] request stream   KEYS[2] decision log   KEYS[3] decision-log size counter
-- ARGV[1] consumer group   ARGV[2] this worker (consumer)   ARGV[3] decision-log maxlen
-- ARGV[4] lowest entry id  ARGV[5] highest entry id
-- ARGV[6...] pairs: entry id, its record (one msgpack map; '' when not logged)
-- The log is trimmed by decisions, not entries (an entry holds up to 512): the counter
-- keeps their sum, and once it passes maxlen by a tenth the oldest entries go.
-- Returns how many entries this call acknowledged (fewer than given: the others were no
-- longer this worker's).
local owned = {}
local from = ARGV[4]
while true do
  local page = redis.call('XPENDING', KEYS[1], ARGV[1], from, ARGV[5], 1000, ARGV[2])
  for _, p in ipairs(page) do owned[p[1]] = true end
  if #page < 1000 then break end
  from = '(' .. page[#page][1]
end
local ids, records = {}, {}
for i = 6, #ARGV, 2 do
  if owned[ARGV[i]] then
    ids[#ids + 1] = ARGV[i]
    if ARGV[i + 1] ~= '' then records[#records + 1] = ARGV[i + 1] end
  end
end
if #ids == 0 then
  return 0
end
local acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
local n = #records
if n > 0 then
  -- a msgpack array of the records: header (fixarray or array16), then the maps as sent
  local header
  if n < 16 then header = string.char(0x90 + n)
  else header = string.char(0xdc, math.floor(n / 256), n % 256) end
  redis.call('XADD', KEYS[2], '*', 'b', header .. table.concat(records), 'n', n)
  local maxlen = tonumber(ARGV[3])
  local total = redis.call('INCRBY', KEYS[3], n)
  if total > maxlen + math.max(100, math.floor(maxlen / 10)) then
    local drop = 0
    for _ = 1, 20 do
      if total - drop <= maxlen then break end
      local oldest = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 100)
      if #oldest == 0 then break end
      local last = nil
      for _, entry in ipairs(oldest) do
        if total - drop <= maxlen then break end
        local size = 1
        local f = entry[2]
        for j = 1, #f, 2 do
          if f[j] == 'n' then size = tonumber(f[j + 1]) or 1 end
        end
        drop = drop + size
        last = entry[1]
      end
      if last == nil then break end
      local dash = string.find(last, '-', 1, true)
      local ms = string.sub(last, 1, dash - 1)
      local seq = tonumber(string.sub(last, dash + 1))
      redis.call('XTRIM', KEYS[2], 'MINID', ms .. '-' .. (seq + 1))
    end
    if drop > 0 then
      redis.call('DECRBY', KEYS[3], drop)
    end
  end
end
return acked
