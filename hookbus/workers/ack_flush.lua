-- hookbus: settle what a chain worker answered while its ownership lease held (ack_ledger.py).
--
-- Answers on that path were sent as a bare XADD to the producer's inbox; their XACKs and
-- their decision-log records wait in the worker and come here together, every ~100 ms:
-- one XACK for all of them and one decision-log entry holding the records (b, n). An
-- entry is acknowledged exactly when its record is logged, so a worker that dies before a
-- flush leaves both to the reclaimer, which finds the answer in the producer's inbox.
--
-- KEYS[1] request stream   KEYS[2] decision log   KEYS[3] decision-log size counter
-- ARGV[1] consumer group   ARGV[2] decision-log maxlen, in decisions
-- ARGV[3] msgpack list of records ('' when none)   ARGV[4] how many records
-- ARGV[5...] entry ids to acknowledge
-- The log is trimmed by decisions, not entries (an entry holds up to 512): the counter
-- keeps their sum, and once it passes maxlen by a tenth the oldest entries go.
-- Returns how many entries this call acknowledged (fewer than given: another delivery of
-- one of them was answered elsewhere).
local acked = 0
if #ARGV >= 5 then
  acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 5))
end
local n = tonumber(ARGV[4])
if n > 0 then
  redis.call('XADD', KEYS[2], '*', 'b', ARGV[3], 'n', ARGV[4])
  local maxlen = tonumber(ARGV[2])
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
