-- hookbus: expire a parked request nobody decided in time.
--
-- Only a pending approval whose expiry (Redis's clock) has passed: its state becomes
-- expired, it moves to the done set, the producer gets the answer stored when it was parked
-- (the event's failure policy, degraded: "no operator decision within N s"), and the
-- decision log and the approvals log record it. Any number of sweepers may race on one
-- item: one expires it, the others find it no longer pending.
--
-- KEYS[1] approval hash  KEYS[2] pending set  KEYS[3] done set  KEYS[4] reply key
-- KEYS[5] decision log   KEYS[6] approvals log stream
-- ARGV[1] reply list ttl ms  ARGV[2] inbox maxlen  ARGV[3] decision log maxlen (0: none)
-- ARGV[4] keep ms  ARGV[5] approvals log maxlen  ARGV[6] approval id  ARGV[7] done bound
-- Returns 1 when expired now, 0 otherwise.
local item = redis.call('HMGET', KEYS[1], 'state', 'expires_ms', 'reply_to', 'mode', 'x',
  'event_id', 'kind', 'session', 'agent', 'policy')
if not item[1] then
  redis.call('ZREM', KEYS[2], ARGV[6])
  return 0
end
if item[1] ~= 'pending' then
  redis.call('ZREM', KEYS[2], ARGV[6])
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(item[2]) or item[3] ~= KEYS[4] then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'expired', 'decided_ms', now, 'outcome', item[10])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[6])
redis.call('ZADD', KEYS[3], now, ARGV[6])
redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -tonumber(ARGV[7]) - 1)
local mode = item[4]
if mode == 'l' then
  redis.call('RPUSH', KEYS[4], item[5])
  redis.call('PEXPIRE', KEYS[4], ARGV[1])
elseif mode == 's' then
  local existed = redis.call('EXISTS', KEYS[4])
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[2], '*', 'id', item[6], 'd', item[5])
  if existed == 0 then
    redis.call('PEXPIRE', KEYS[4], ARGV[1])
  end
end
if tonumber(ARGV[3]) > 0 then
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[3], '*',
    'id', item[6], 'kind', item[7], 'outcome', item[10], 'worker', 'approvals',
    'entry', '', 'degraded', '1', 'duration_us', '0',
    'session', item[8], 'agent', item[9], 'd', item[5])
end
redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[5], '*',
  'type', 'expired', 'approval', ARGV[6])
return 1
