-- Take over the pending requests of one chain worker whose lease has expired.
-- KEYS[1]: the request stream. ARGV: group, dead consumer, new consumer, min idle ms, count.
-- Atomic, so two reclaimers never both take an entry: the second finds it owned by the
-- first. Returns {entry id, deliveries (this one included), {field, value, ...}} per entry;
-- entries trimmed from the stream leave the pending list in XCLAIM and are not returned.
local pending = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', ARGV[4], '-', '+', ARGV[5], ARGV[2])
if #pending == 0 then
  return {}
end
local ids, counts = {}, {}
for i, p in ipairs(pending) do
  ids[i] = p[1]
  counts[p[1]] = p[4] + 1
end
local claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], ARGV[4], unpack(ids))
local out = {}
for _, entry in ipairs(claimed) do
  if entry[2] then
    out[#out + 1] = {entry[1], counts[entry[1]], entry[2]}
  end
end
return out
