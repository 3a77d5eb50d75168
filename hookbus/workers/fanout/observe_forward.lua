-- hookbus fan-out: forward answered requests to the event log for their observer hooks.
--
-- A decision-log entry's observed requests are appended to the event log only when this
-- call's XACK removed the entry from the observe group's pending list: an observer whose
-- entries another one already reclaimed and forwarded adds nothing a second time, so each
-- answered request reaches the event log (and its observers) exactly once.
--
-- KEYS[1] decision log stream   KEYS[2] event log stream (the same partition's slot)
-- ARGV[1] consumer group        ARGV[2] event log maxlen   ARGV[3] number of entries N
-- then, N times: entry id, number of events E, then E times: the event (msgpack)
-- Returns how many events this call appended.
local group = ARGV[1]
local maxlen = ARGV[2]
local n = tonumber(ARGV[3])
local i = 4
local added = 0
for _ = 1, n do
  local entry = ARGV[i]
  local events = tonumber(ARGV[i + 1])
  i = i + 2
  local mine = redis.call('XACK', KEYS[1], group, entry)
  for _ = 1, events do
    if mine == 1 then
      redis.call('XADD', KEYS[2], 'MAXLEN', '~', maxlen, '*', 'e', ARGV[i])
      added = added + 1
    end
    i = i + 1
  end
end
return added
