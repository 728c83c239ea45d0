-- drawstate: what one shard holds of a fair start's draw, for whoever closes it.
-- KEYS[1] {sale:S}:meta, KEYS[2] {sale:S}:draw (order id -> "I:U:enteredAtMillis")
-- Returns {held, nowMillis, fair, drawn, entrylost, orderId...}: held 0 when the shard is not
-- loaded or marked lost (nothing else is then told); fair the end of the window (0: no draw),
-- drawn 1 once the decided draw is applied here, entrylost 1 when the shard was loaded after the
-- window opened (the entries it held then are gone from Redis, not from the queue); then the
-- order ids of the entries it holds undecided (the window closed by this Redis's clock when
-- nowMillis >= fair: no entry is added any more).
local m = redis.call('HMGET', KEYS[1], 'seq', 'lost', 'fair', 'drawn', 'entrylost')
if not m[1] or m[2] == '1' then
  return {0, 0, 0, 0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {1, now, tonumber(m[3] or '0'), m[4] == '1' and 1 or 0, m[5] == '1' and 1 or 0}
if m[4] ~= '1' then
  for _, id in ipairs(redis.call('HKEYS', KEYS[2])) do
    out[#out + 1] = id
  end
end
return out
