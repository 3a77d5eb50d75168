-- A judge hook's verdict shared by the fleet: one key per (hook, model, instructions,
-- input, bundle). KEYS[1]: the verdict's key. ARGV[1]: take | put | drop.
-- take (ARGV[2]: claim ms): {1, verdict} when one is stored; {0} when this caller now holds
--   the claim (it asks the model); {-1} while another caller holds it.
-- put (ARGV[2]: the verdict, ARGV[3]: ttl ms): stores it (ending the claim).
-- drop: ends a claim whose call failed (never removes a verdict).
local op = ARGV[1]
if op == 'put' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', tonumber(ARGV[3]))
  return {1}
end
local held = redis.call('GET', KEYS[1])
if op == 'drop' then
  if held == 'claimed' then
    redis.call('DEL', KEYS[1])
  end
  return {1}
end
if held and held ~= 'claimed' then
  return {1, held}
end
if held then
  return {-1}
end
redis.call('SET', KEYS[1], 'claimed', 'PX', tonumber(ARGV[2]))
return {0}
