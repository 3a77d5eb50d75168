-- Renew (ARGV[2] = ms) or release (ARGV[2] = 0) a reader slot, only if ARGV[1] holds it.
-- Returns 1 when this process still held it, 0 when it was lost (expired, or taken).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if tonumber(ARGV[2]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
else
  redis.call('DEL', KEYS[1])
end
return 1
