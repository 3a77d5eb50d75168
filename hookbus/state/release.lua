-- Release a lock if (and only if) the session ARGV[1] of the agent ARGV[2] holds it (the
-- value starts "session\nagent\n"). Returns 1 when released.
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
end
local owner = ARGV[1] .. '\n' .. ARGV[2] .. '\n'
if string.sub(held, 1, #owner) == owner then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
