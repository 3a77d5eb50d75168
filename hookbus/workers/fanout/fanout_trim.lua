-- hookbus fan-out: drop a flushed batch from the head of a batching hook's buffer, once.
--
-- Trims only when the buffer still starts with the batch's first item, so a flush repeated
-- by a dispatcher whose lock had expired cannot drop events of the next batch.
--
-- KEYS[1] batch list   ARGV[1] the batch's first item   ARGV[2] how many items it took
-- Returns 1 when trimmed, 0 when another flush already had.
if redis.call('LINDEX', KEYS[1], 0) == ARGV[1] then
  redis.call('LTRIM', KEYS[1], ARGV[2], -1)
  return 1
end
return 0
