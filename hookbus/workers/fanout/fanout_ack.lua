-- hookbus fan-out: acknowledge event-log entries and buffer their batching hooks' events.
--
-- An entry's events are appended to the batch lists only when this call's XACK removed the
-- entry from the group's pending list: a slow dispatcher whose entries another one already
-- reclaimed and handled buffers nothing a second time.
--
-- KEYS[1] event log stream    KEYS[2..] batch lists (referenced by index below)
-- ARGV[1] consumer group      ARGV[2] number of entries N
-- then, N times: entry id, number of pushes P, then P times: index into KEYS, item
-- Returns how many entries this call acknowledged.
local group = ARGV[1]
local n = tonumber(ARGV[2])
local i = 3
local acked = 0
for _ = 1, n do
  local entry = ARGV[i]
  local pushes = tonumber(ARGV[i + 1])
  i = i + 2
  local mine = redis.call('XACK', KEYS[1], group, entry)
  acked = acked + mine
  for _ = 1, pushes do
    if mine == 1 then
      redis.call('RPUSH', KEYS[tonumber(ARGV[i])], ARGV[i + 1])
    end
    i = i + 2
  end
end
return acked
