-- hookbus: answer blocking requests exactly once (chain worker, one round trip per batch).
--
-- The worker whose XACK removes an entry from the group's pending list is the one that
-- answers it: a request delivered twice (reclaimed from a slow worker) gets one reply and
-- one decision-log entry, written by whichever worker finished first. The entry must also
-- still be this worker's in the pending list: a worker whose lease lapsed must not answer
-- what another took over and answered without a guard, its XACK still in that worker's
-- ack ledger (workers/ack_ledger.py). This path is taken only when the lease does not
-- hold, for reply lists, and for answers followed by a dead letter. One call answers
-- every request a worker has ready (one script call per batch, not per request); each
-- request is still acknowledged and answered on its own.
--
-- KEYS[1] request stream   KEYS[2] decision log stream
-- KEYS[2 + i] reply key of request i (KEYS[1]: none)
-- ARGV[1] consumer group   ARGV[2] reply list ttl in ms  ARGV[3] inbox maxlen (approximate)
-- then 14 per request i, from ARGV[4 + 14 * (i - 1)]:
--   +0 decision log maxlen (approximate; 0 = not logged)   +1 entry id
--   +2 mode: l (list) | s (inbox stream) | n (no reply)     +3 decision (msgpack)
--   +4 request id  +5 kind  +6 outcome  +7 worker  +8 degraded (0|1)
--   +9 chain duration in µs  +10 session id  +11 agent id
--   +12 tool name  +13 the tool's input summed up (both may be empty)
-- The decision log records the entry id as 'entry' so that `hookbus replay` can find the
-- request.
-- An inbox stream (mode s) is created and kept alive (PEXPIRE) by its producer, off the
-- per-request path (producers/inbox_ttl.py): the reply is added with NOMKSTREAM and needs no
-- PEXPIRE of its own, and a reply to a producer that is gone (its inbox expired) is dropped
-- instead of leaving a key behind. A reply list (mode l: the lean agent-CLI adapters) still
-- gets its PEXPIRE, since a list whose reader has left would otherwise stay forever.
-- Returns a table: per request, 1 when this call answered it, 0 when another delivery had.
local out = {}
for i = 1, #KEYS - 2 do
  local a = 3 + 14 * (i - 1)
  local reply = KEYS[2 + i]
  local owner = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[a + 2], ARGV[a + 2], 1)
  if #owner == 0 or owner[1][2] ~= ARGV[a + 8] then
    out[i] = 0
  elseif redis.call('XACK', KEYS[1], ARGV[1], ARGV[a + 2]) == 0 then
    out[i] = 0
  else
    local mode = ARGV[a + 3]
    if mode == 'l' then
      redis.call('RPUSH', reply, ARGV[a + 4])
      redis.call('PEXPIRE', reply, ARGV[2])
    elseif mode == 's' then
      redis.call('XADD', reply, 'NOMKSTREAM', 'MAXLEN', '~', ARGV[3], '*',
        'id', ARGV[a + 5], 'd', ARGV[a + 4])
    end
    if tonumber(ARGV[a + 1]) > 0 then
      redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[a + 1], '*',
        'id', ARGV[a + 5], 'kind', ARGV[a + 6], 'outcome', ARGV[a + 7], 'worker', ARGV[a + 8],
        'entry', ARGV[a + 2], 'degraded', ARGV[a + 9], 'duration_us', ARGV[a + 10],
        'session', ARGV[a + 11], 'agent', ARGV[a + 12], 'd', ARGV[a + 4],
        'tool', ARGV[a + 13], 'input', ARGV[a + 14])
    end
    out[i] = 1
  end
end
return out
