-- hookbus: create a producer's reply inbox if it is missing and (re)set its expiry.
--
-- Workers add replies to an inbox with XADD NOMKSTREAM and no PEXPIRE (reqrep.lua), so the
-- producer that reads it keeps it alive: it runs this script in the same write as a request
-- whenever the inbox's expiry is less than half its ttl away (about once a ttl/2 per inbox,
-- not per request). XADD MAXLEN 0 creates an empty stream; an existing inbox is never
-- trimmed here (replies not read yet stay).
-- KEYS[1] inbox stream   ARGV[1] ttl in ms
-- Returns 1 when the inbox was created, 0 when it existed.
local created = 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('XADD', KEYS[1], 'MAXLEN', '0', '*', 'k', '1')
  created = 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return created
