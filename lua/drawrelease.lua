-- drawrelease: takes back a draw entry whose publish failed (the shopper was answered 503), so
-- the draw does not wait for it. A message of it that did reach the queue is still written and
-- decided like any entry. The purchase token's record of the attempt becomes a refusal (-4, as
-- for a released reservation): the same attempt sent again is not answered 202 for an entry the
-- draw no longer holds.
-- KEYS[1] {sale:S}:entrants, KEYS[2] {sale:S}:draw, KEYS[3] {sale:S}:tok:NONCE
-- ARGV[1] order id, ARGV[2] the shopper (as in buyers)
-- Returns 1 taken back, 0 not held (decided, or taken back before).
local rec = redis.call('GET', KEYS[3])
if rec and string.sub(rec, 1, #ARGV[1] + 5) == ARGV[1] .. '|-12|' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('SET', KEYS[3], ARGV[1] .. '|-4|' .. now .. '|', 'XX', 'KEEPTTL')
end
if redis.call('HDEL', KEYS[2], ARGV[1]) == 0 then
  return 0
end
if redis.call('HGET', KEYS[1], ARGV[2]) == ARGV[1] then
  redis.call('HDEL', KEYS[1], ARGV[2])
end
return 1
