-- hookbus: answer one blocking request exactly once (chain worker, one round trip).
--
-- The worker whose XACK removes the entry from the group's pending list is the one that
-- answers: a request delivered twice (reclaimed from a slow worker) gets one reply and one
-- decision-log entry, written by whichever worker finished first.
--
-- KEYS[1] request stream     KEYS[2] reply key (list or inbox stream; KEYS[1] when none)
-- KEYS[3] decision log stream
-- ARGV[1] consumer group     ARGV[2] entry id          ARGV[3] mode: l (list) | s (stream) | n
-- ARGV[4] decision (msgpack) ARGV[5] reply ttl in ms   ARGV[6] inbox maxlen (approximate)
-- ARGV[7] decision log maxlen (approximate; 0 = no log) ARGV[8] request id
-- ARGV[9..] decision-log fields, as name value pairs
-- Returns 1 when this call answered, 0 when another delivery already had.
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return 0
end
if ARGV[3] == 'l' then
  redis.call('RPUSH', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
elseif ARGV[3] == 's' then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'id', ARGV[8], 'd', ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ARGV[5])
end
if tonumber(ARGV[7]) > 0 and #ARGV > 8 then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', unpack(ARGV, 9))
end
return 1
