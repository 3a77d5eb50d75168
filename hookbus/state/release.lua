-- Release a lock if (and only if) ARGV[1]'s session holds it. Returns 1 when released.
local held = redis.call('GET', KEYS[1])
if not held then
  return 0
end
local nl = string.find(held, '\n', 1, true)
if nl and string.sub(held, 1, nl - 1) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
