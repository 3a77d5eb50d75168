-- hookbus: answer one blocking request exactly once (chain worker, one round trip).
--
-- The worker whose XACK removes the entry from the group's pending list is the one that
-- answers: a request delivered twice (reclaimed from a slow worker) gets one reply and one
-- decision-log entry, written by whichever worker finished first.
--
-- KEYS[1] request stream   KEYS[2] decision log stream   KEYS[3] reply key (KEYS[1]: none)
-- ARGV[1] consumer group   ARGV[2] reply list ttl in ms  ARGV[3] inbox maxlen (approximate)
-- ARGV[4] decision log maxlen (approximate; 0 = no log)
-- ARGV[5] entry id         ARGV[6] mode: l (list) | s (inbox stream) | n (no reply)
-- ARGV[7] decision (msgpack)                             ARGV[8] request id
-- ARGV[9] kind  ARGV[10] outcome  ARGV[11] worker  ARGV[12] degraded (0|1)
-- ARGV[13] chain duration in µs   ARGV[14] session id    ARGV[15] agent id
-- The decision log records ARGV[5] as 'entry' so that `hookbus replay` can find the request.
-- An inbox stream (mode s) is created and kept alive (PEXPIRE) by its producer, off the
-- per-request path (inbox_keepalive.lua): the reply is added with NOMKSTREAM and needs no
-- PEXPIRE of its own, and a reply to a producer that is gone (its inbox expired) is dropped
-- instead of leaving a key behind. A reply list (mode l: the lean agent-CLI adapters) still
-- gets its PEXPIRE, since a list whose reader has left would otherwise stay forever.
-- Returns 1 when this call answered, 0 when another delivery already had.
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[5]) == 0 then
  return 0
end
if ARGV[6] == 'l' then
  redis.call('RPUSH', KEYS[3], ARGV[7])
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
elseif ARGV[6] == 's' then
  redis.call('XADD', KEYS[3], 'NOMKSTREAM', 'MAXLEN', '~', ARGV[3], '*', 'id', ARGV[8], 'd', ARGV[7])
end
if tonumber(ARGV[4]) > 0 then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*',
    'id', ARGV[8], 'kind', ARGV[9], 'outcome', ARGV[10], 'worker', ARGV[11], 'entry', ARGV[5],
    'degraded', ARGV[12], 'duration_us', ARGV[13], 'session', ARGV[14], 'agent', ARGV[15],
    'd', ARGV[7])
end
return 1
