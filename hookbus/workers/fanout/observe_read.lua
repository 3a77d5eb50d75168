-- hookbus request observers: read the decision log in the observe group, first counting
-- what its trim took before the group read it.
--
-- The decision log is trimmed by its writers (XADD MAXLEN, streams.decisions_maxlen) whether
-- or not the observers have read it. When the log's first entry is past the group's
-- last-delivered id, every entry left is unread, and the unread ones that are gone are what
-- was added, less what the group read, less what is left. They are counted (KEYS[2]) and
-- the group's entries-read is set to take them in, so its lag again says how many wait.
-- Counting and reading in one script leaves no moment for a trim between the two (a read
-- past a gap would hide it for good).
--
-- KEYS[1] the decision log   KEYS[2] its counter of entries lost to the trim
-- ARGV[1] consumer group     ARGV[2] consumer   ARGV[3] entries to read at most
-- Returns {entries (as XREADGROUP gives them, or false), last id of the log, lost now}.
--#include stream_ids

local lost = 0
local last = '0-0'
if redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  local added = tonumber(field(info, 'entries-added'))
  local first = field(info, 'recorded-first-entry-id')
  local length = tonumber(field(info, 'length'))
  last = field(info, 'last-generated-id')
  for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    if field(group, 'name') == ARGV[1] then
      local delivered = field(group, 'last-delivered-id')
      local read = field(group, 'entries-read')
      if read and (length == 0 or less(delivered, first)) then
        local gone = added - tonumber(read) - length
        if gone > 0 then
          lost = gone
          redis.call('INCRBY', KEYS[2], gone)
          redis.call('XGROUP', 'SETID', KEYS[1], ARGV[1], delivered, 'ENTRIESREAD', added - length)
        end
      end
    end
  end
end
local entries = redis.call(
  'XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '>'
)
return {entries, last, lost}
