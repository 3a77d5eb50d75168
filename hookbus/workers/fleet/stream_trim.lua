-- hookbus: trim a stream down to its history of ARGV[1] entries, but only of what every
-- consumer group has been delivered and acknowledged, never an entry some group has not
-- (Redis 7 has no trim that respects groups).
--
-- KEYS[1] the stream   KEYS[2] its counter of entries lost to trimming before delivery
-- ARGV[1] how many entries to keep at least (the history replay and tail read)
-- ARGV[2] "1" to look for entries lost to a trim before delivery (below), else only trim:
-- a stream within its history costs then one XLEN.
-- The floor kept is, over every group, its oldest pending entry, or the entry after its
-- last-delivered id when nothing is pending. The history's boundary is estimated from the
-- first and last ids (entries spread evenly over their time span: cheap, and close enough
-- for a history); XTRIM MINID ~ drops only whole nodes below the lower of the two. A stream
-- without any group yet keeps everything (a consumer that starts later reads it all).
--
-- Entries may still have been trimmed before delivery by a producer's XADD MAXLEN (an older
-- or foreign producer): when the stream's first entry is past a group's last-delivered id,
-- every entry left is one the group has not read, and the unread ones that are gone are
-- what was added, less what the group read, less what is left. They are counted
-- (KEYS[2]), and the group's entries-read is set to take them in, so its lag again says
-- how many wait (Redis would otherwise go on counting the gone ones as lag).
-- Returns {entries trimmed, length after, entries found lost now}.
local keep = tonumber(ARGV[1])
local current = redis.call('XLEN', KEYS[1])
if current == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  return {0, 0, 0}
end
if current <= keep and ARGV[2] ~= '1' then
  return {0, current, 0}
end

--#include stream_ids

local info = redis.call('XINFO', 'STREAM', KEYS[1])
local added = tonumber(field(info, 'entries-added'))
local first = field(info, 'recorded-first-entry-id')
local length = tonumber(field(info, 'length'))
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
local floor = nil
local lost = 0
for _, group in ipairs(groups) do
  local name = field(group, 'name')
  local last = field(group, 'last-delivered-id')
  local read = field(group, 'entries-read')
  if read and (length == 0 or less(last, first)) then
    -- the first entry left is past what the group read: those left are all unread
    local gone = added - tonumber(read) - length
    if gone > 0 then
      lost = lost + gone
      redis.call('XGROUP', 'SETID', KEYS[1], name, last, 'ENTRIESREAD', added - length)
    end
  end
  local keep
  local pending = redis.call('XPENDING', KEYS[1], name)
  if tonumber(pending[1]) > 0 then
    keep = pending[2]
  else
    local ms, seq = parse(last)
    keep = string.format('%.0f-%.0f', ms, seq + 1)
  end
  if floor == nil or less(keep, floor) then
    floor = keep
  end
end
if lost > 0 then
  redis.call('INCRBY', KEYS[2], lost)
end
local trimmed = 0
if floor ~= nil and length > keep then
  local first_ms = parse(first)
  local last_ms = parse(field(info, 'last-generated-id'))
  local cut_ms = first_ms + math.floor((last_ms - first_ms) * (length - keep) / length)
  local cut = string.format('%.0f-0', cut_ms)
  if less(cut, floor) then
    floor = cut
  end
  trimmed = redis.call('XTRIM', KEYS[1], 'MINID', '~', floor)
end
return {trimmed, redis.call('XLEN', KEYS[1]), lost}
