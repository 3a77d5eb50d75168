-- A sliding-window limit: count this request (ARGV[3], its id) in the window of the last
-- ARGV[1] ms if fewer than ARGV[2] are in it. Redis's own clock measures the window.
-- Returns {allowed (0/1), count in the window, ms until the oldest entry leaves it (only
-- when refused; 0 otherwise)}. A request counted before (a redelivery) is allowed again and
-- not counted twice.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZSCORE', KEYS[1], ARGV[3]) then
  return {1, redis.call('ZCARD', KEYS[1]), 0}
end
local count = redis.call('ZCARD', KEYS[1])
if count < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  -- the window lives as long as its newest entry counts
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, count + 1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, count, tonumber(oldest[2]) + window - now}
