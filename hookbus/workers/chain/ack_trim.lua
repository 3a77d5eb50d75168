-- hookbus: trim a decision log whose entries hold batches of decisions (ack_ledger.py).
--
-- KEYS[1] decision log   KEYS[2] its size counter (decisions, summed by the flushes)
-- ARGV[1] the most decisions to keep (streams.decisions_maxlen)
-- The counter says how many decisions the log holds; the entries it takes to hold maxlen
-- of them are estimated from the average per entry, so nothing large is read back: the
-- oldest entries beyond that go, and the counter is lowered by what they held, on average.
-- Entries written one decision at a time (the guarded path, fan-out jobs) count as one.
-- Returns the entries dropped.
local total = tonumber(redis.call('GET', KEYS[2]) or '0')
local maxlen = tonumber(ARGV[1])
if total <= maxlen then
  return 0
end
local len = redis.call('XLEN', KEYS[1])
if len == 0 then
  redis.call('SET', KEYS[2], 0)
  return 0
end
local keep = math.max(1, math.floor(len * maxlen / total))
local dropped = redis.call('XTRIM', KEYS[1], 'MAXLEN', keep)
redis.call('SET', KEYS[2], math.floor(total * (len - dropped) / len))
return dropped
