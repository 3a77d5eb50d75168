-- hookbus: an operator's decision on a parked request, taken exactly once.
--
-- Only a pending approval whose expiry (Redis's clock) has not passed is decided: its state
-- and who decided are written, it moves from the pending set to the done set, the waiting
-- producer gets the final decision on its reply key at once, and the decision log and the
-- approvals log record it. A second decision finds the state changed and is refused with
-- who decided first. An inbox stream that has expired meanwhile is created again (with the
-- reply ttl) so a producer still reading it gets the answer.
--
-- KEYS[1] approval hash  KEYS[2] pending set  KEYS[3] done set  KEYS[4] reply key
-- KEYS[5] decision log   KEYS[6] approvals log stream  KEYS[7] the agent's pending set
-- ARGV[1] state allowed|denied  ARGV[2] who (operator:<name>)  ARGV[3] reason
-- ARGV[4] final decision (msgpack)  ARGV[5] reply list ttl ms  ARGV[6] inbox maxlen
-- ARGV[7] decision log maxlen (0: not logged)  ARGV[8] keep ms  ARGV[9] approvals log maxlen
-- ARGV[10] outcome allow|deny  ARGV[11] done set bound
-- An approval may name who may answer it ('operators', newline-separated; empty: anyone)
-- and how many different operators must allow it ('approvers'): each allow short of that
-- is kept in 'allowed_by' and the item stays pending; one deny denies.
-- Returns {1, now} when decided; {0, state, who, at} when it was decided before;
-- {-1} when it has expired (not decided: the caller expires it); {-2} when it is unknown;
-- {2, allows so far, allows needed} for an allow that is not the last one needed;
-- {-3, allowed_by} when this operator allowed it already; {-4, operators} when this
-- operator may not answer it; {-5} when this operator is the asking agent's own identity
-- and the approval forbids it ('requester').
local item = redis.call('HMGET', KEYS[1], 'state', 'decided_by', 'decided_ms', 'expires_ms',
  'reply_to', 'mode', 'id', 'event_id', 'kind', 'session', 'agent', 'approvers', 'operators',
  'allowed_by', 'tool', 'input', 'requester')
if not item[1] then
  return {-2}
end
if item[1] ~= 'pending' then
  return {0, item[1], item[2] or '', item[3] or ''}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now >= tonumber(item[4]) then
  return {-1}
end
if item[5] ~= KEYS[4] then
  return redis.error_reply('approval ' .. item[7] .. ': reply key does not match')
end
if (item[17] or '') ~= '' and item[17] == ARGV[2] then
  return {-5}
end
local operators = item[13] or ''
if operators ~= '' then
  local listed = false
  for name in string.gmatch(operators, '[^\n]+') do
    if name == ARGV[2] then
      listed = true
    end
  end
  if not listed then
    return {-4, operators}
  end
end
if ARGV[10] == 'allow' then
  local by = item[14] or ''
  local count = 1
  for name in string.gmatch(by, '[^\n]+') do
    if name == ARGV[2] then
      return {-3, by}
    end
    count = count + 1
  end
  local now_by = ARGV[2]
  if by ~= '' then
    now_by = by .. '\n' .. ARGV[2]
  end
  redis.call('HSET', KEYS[1], 'allowed_by', now_by)
  local need = tonumber(item[12] or '1') or 1
  if count < need then
    redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[9], '*',
      'type', 'allowed-once', 'approval', item[7], 'by', ARGV[2])
    return {2, count, need}
  end
end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'decided_by', ARGV[2], 'decided_ms', now,
  'note', ARGV[3], 'outcome', ARGV[10])
redis.call('PEXPIRE', KEYS[1], ARGV[8])
redis.call('ZREM', KEYS[2], item[7])
redis.call('ZREM', KEYS[7], item[7])
redis.call('ZADD', KEYS[3], now, item[7])
redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -tonumber(ARGV[11]) - 1)
local mode = item[6]
if mode == 'l' then
  redis.call('RPUSH', KEYS[4], ARGV[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[5])
elseif mode == 's' then
  local existed = redis.call('EXISTS', KEYS[4])
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*', 'id', item[8], 'd', ARGV[4])
  if existed == 0 then
    redis.call('PEXPIRE', KEYS[4], ARGV[5])
  end
end
if tonumber(ARGV[7]) > 0 then
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[7], '*',
    'id', item[8], 'kind', item[9], 'outcome', ARGV[10], 'worker', ARGV[2],
    'entry', '', 'degraded', '0', 'duration_us', '0',
    'session', item[10], 'agent', item[11], 'd', ARGV[4],
    'tool', item[15] or '', 'input', item[16] or '')
end
redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[9], '*',
  'type', ARGV[1], 'approval', item[7], 'by', ARGV[2])
return {1, now}
