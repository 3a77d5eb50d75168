-- Take a lock for an agent's session, or say who holds it. KEYS[1]: the lock; ARGV[1]: the
-- session, ARGV[2]: the agent, ARGV[3]: the TTL in ms. The value is "session\nagent\nsince_ms"
-- (neither field holds a newline). A session belongs to its agent: the lock is held already
-- only when both the session and the agent are the holder's.
-- Returns {1, value, ms left, 1} when this call took it, {1, value, ms left, 0} when the
-- session held it already (the TTL is not extended: a lock is released at the latest TTL
-- after it was taken), else {0, value, ms left} for another session's lock.
local held = redis.call('GET', KEYS[1])
if not held then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local value = ARGV[1] .. '\n' .. ARGV[2] .. '\n' .. now
  redis.call('SET', KEYS[1], value, 'PX', tonumber(ARGV[3]))
  return {1, value, tonumber(ARGV[3]), 1}
end
local owner = ARGV[1] .. '\n' .. ARGV[2] .. '\n'
if string.sub(held, 1, #owner) == owner then
  return {1, held, redis.call('PTTL', KEYS[1]), 0}
end
return {0, held, redis.call('PTTL', KEYS[1])}
