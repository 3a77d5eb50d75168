-- hookbus: park a blocking request for an operator (a hook answered ask and routes there).
--
-- Atomic with the request's XACK, and only for the delivery that wins it (the entry must
-- still be this worker's in the pending list, as in reqrep.lua): a request run twice is
-- parked once. The approval's hash and its place in the partition's pending set are
-- written, the producer gets the first reply (outcome ask, approval state pending: it keeps
-- waiting), the decision log records the ask, and the approvals log announces the item.
-- Every key is in the request's partition slot.
--
-- KEYS[1] request stream  KEYS[2] decision log  KEYS[3] reply key (or KEYS[1]: none)
-- KEYS[4] approval hash   KEYS[5] pending set   KEYS[6] approvals log stream
-- KEYS[7] the asking agent's pending set (by expiry)
-- ARGV[1] consumer group  ARGV[2] reply list ttl ms  ARGV[3] inbox maxlen
-- ARGV[4] decision log maxlen (0: not logged)  ARGV[5] entry id  ARGV[6] mode l|s|n
-- ARGV[7] first reply (msgpack Decision)  ARGV[8] event id (the decision log's and the
-- inbox entry's id, as in reqrep.lua)  ARGV[9] kind  ARGV[10] worker
-- ARGV[11] chain duration us  ARGV[12] session  ARGV[13] agent  ARGV[14] approval id
-- ARGV[15] expires at (ms, Redis clock)  ARGV[16] approvals log maxlen
-- ARGV[17] most approvals the agent may have pending (0: no bound)
-- ARGV[18..] the approval hash's fields and values
-- Returns 1 when parked, 0 when another delivery had answered, -1 when the approval id is
-- taken by another request (the caller answers ask the usual way), -2 when the agent has
-- its bound of approvals pending already (nothing written: the caller answers by policy).
local owner = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[5], ARGV[5], 1)
if #owner == 0 or owner[1][2] ~= ARGV[10] then
  return 0
end
if redis.call('EXISTS', KEYS[4]) == 1 then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = tonumber(ARGV[17])
if cap > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', now)
  if redis.call('ZCARD', KEYS[7]) >= cap then
    return -2
  end
end
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[5]) == 0 then
  return 0
end
local fields = {}
local tool, input = '', ''
for i = 18, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
for i = 18, #ARGV - 1, 2 do  -- the decision log shows what was asked, as the item has it
  if ARGV[i] == 'tool' then tool = ARGV[i + 1] elseif ARGV[i] == 'input' then input = ARGV[i + 1] end
end
redis.call('HSET', KEYS[4], unpack(fields))
redis.call('ZADD', KEYS[5], ARGV[15], ARGV[14])
redis.call('ZADD', KEYS[7], ARGV[15], ARGV[14])
-- the agent's set lives as long as its latest expiry (never shortened by an earlier one)
local ttl = redis.call('PTTL', KEYS[7])
if ttl < 0 or now + ttl < tonumber(ARGV[15]) then
  redis.call('PEXPIREAT', KEYS[7], ARGV[15])
end
local mode = ARGV[6]
if mode == 'l' then
  redis.call('RPUSH', KEYS[3], ARGV[7])
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
elseif mode == 's' then
  redis.call('XADD', KEYS[3], 'NOMKSTREAM', 'MAXLEN', '~', ARGV[3], '*',
    'id', ARGV[8], 'd', ARGV[7])
end
if tonumber(ARGV[4]) > 0 then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*',
    'id', ARGV[8], 'kind', ARGV[9], 'outcome', 'ask', 'worker', ARGV[10],
    'entry', ARGV[5], 'degraded', '0', 'duration_us', ARGV[11],
    'session', ARGV[12], 'agent', ARGV[13], 'd', ARGV[7], 'tool', tool, 'input', input)
end
redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[16], '*',
  'type', 'pending', 'approval', ARGV[14])
return 1
