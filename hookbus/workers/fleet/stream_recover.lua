-- hookbus: move a stream that can no longer be written aside and recreate it, atomically.
--
-- A stream whose last id is ahead of Redis's clock (an XADD with an explicit id in the
-- future) gives every later XADD * an id from that future, and past the largest id every
-- XADD fails ("The stream has exhausted the last possible ID"). Neither heals by itself.
-- This renames the stream (with its consumer group and entries) to KEYS[2] and creates an
-- empty stream with the same group in its place, so producers write again at once; the
-- caller then drains the entries not yet delivered from KEYS[2].
-- The check is repeated here, so two workers that both saw the problem move it once.
-- KEYS[1] stream   KEYS[2] aside key   ARGV[1] group   ARGV[2] ms ahead of Redis's clock
-- that counts as poisoned
-- Returns 1 when the stream was moved aside, 0 when it was healthy (or missing).
local ok, info = pcall(redis.call, 'XINFO', 'STREAM', KEYS[1])
if not ok then
  return 0
end
local last = nil
for i = 1, #info, 2 do
  if info[i] == 'last-generated-id' then
    last = info[i + 1]
  end
end
if last == nil then
  return 0
end
local ms = tonumber(string.match(last, '^(%d+)-'))
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ms == nil or ms <= now + tonumber(ARGV[2]) then
  return 0
end
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
return 1
