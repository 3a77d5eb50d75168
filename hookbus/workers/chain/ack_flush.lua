-- hookbus: settle answered entries whose worker's lease lapsed since (ack_ledger.py).
--
-- The usual flush of the ack ledger is a MULTI/EXEC (XADD of the batch entry, XACK,
-- INCRBY of the log's size): right while the worker's lease has held since the entries
-- were read, as nobody else can have taken them. After a lapse (the worker was stopped,
-- Redis stalled) some may have been taken over, and logged from their replies by the
-- worker that took them; this script acknowledges and logs only the entries still pending
-- for this worker, so none is logged twice. An entry is acknowledged exactly when its
-- record is logged.
--
-- KEYS[1] request stream   KEYS[2] decision log   KEYS[3] decision-log size counter
-- ARGV[1] consumer group   ARGV[2] this worker (consumer)   ARGV[3] decision-log maxlen
-- ARGV[4] lowest entry id  ARGV[5] highest entry id
-- ARGV[6...] pairs: entry id, its record (one msgpack map; '' when not logged)
-- ARGV[3] is not used here (the worker trims with ack_trim.lua when the counter says so).
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
  redis.call('INCRBY', KEYS[3], n)
end
return acked
