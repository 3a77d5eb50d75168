-- One worker's heartbeat, stamped with Redis's own clock.
-- KEYS[1] the workers hash; ARGV[1] the worker id; ARGV[2] its heartbeat, a JSON object
-- without "last_ms". The script appends "last_ms" from TIME, so whether a worker looks
-- alive never depends on its host's clock (one 45 s behind is alive, a dead one 45 s
-- ahead is dead). Returns the stamp, in epoch ms.
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stamp = string.format('%.0f', ms)
local body = ARGV[2]
local sep = ','
if string.sub(body, -2) == '{}' then
  sep = ''
end
redis.call('HSET', KEYS[1], ARGV[1], string.sub(body, 1, -2) .. sep .. '"last_ms":' .. stamp .. '}')
return stamp
