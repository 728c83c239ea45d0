-- tokens: the token budget of one shard of a sale. Purchase tokens handed out and not used yet
-- stay within the units still displayed plus a slack: a block of tokens is granted only while
-- the tokens outstanding (granted, not used, not expired) are under units left × (100 + slack)%.
-- An instance takes tokens in blocks (one round trip per block, not per token) and hands them
-- out itself; every token of a block expires at the block's expiry (rounded to a step), the
-- field it is counted under. The reserve script takes a used token off its field (reserve.lua, KEYS[6]), whatever
-- its attempt's outcome; a field is dropped once its tokens have expired.
-- KEYS[1] {sale:S}:tokens  hash: block expiry (unix ms) -> its tokens not used yet; epoch -> the
--                          meta's epoch the fields were counted under (a rebuild starts afresh)
-- KEYS[2] {sale:S}:meta
-- KEYS[3..] {sale:S}:stock:I of every item of the sale (this shard's part)
-- ARGV[1] tokens wanted, ARGV[2] their lifetime in ms, ARGV[3] the slack in percent of the units
-- left (10: within 1.1×), then pairs (expiry, n): tokens this instance gives back, n of the block
-- expiring then (what it did not hand out of its last block, and tokens refused before they
-- reached the reserve script, by a sold-out flag).
-- Returns {granted, expiryMillis, unitsLeft, outstanding}: granted -1 when the sale is not
-- loaded or lost here (no budget to judge by); 0 when the budget is spent (unitsLeft 0: sold
-- out); else the block, whose tokens expire at expiryMillis.
local m = redis.call('HMGET', KEYS[2], 'epoch', 'lost', 'tokfloor')
if not m[1] or m[2] == '1' then
  return {-1, 0, 0, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local back = {}
for i = 4, #ARGV - 1, 2 do
  back[ARGV[i]] = (back[ARGV[i]] or 0) + tonumber(ARGV[i + 1])
end
local outstanding = 0
if redis.call('HGET', KEYS[1], 'epoch') ~= m[1] then
  redis.call('DEL', KEYS[1]) -- counted under an older load of the sale: a rebuild starts afresh
end
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local f = fields[i]
  if f ~= 'epoch' then
    local n = tonumber(fields[i + 1])
    if tonumber(f) <= now or n <= 0 then
      redis.call('HDEL', KEYS[1], f)
    elseif back[f] then
      n = n - math.min(n, back[f])
      if n == 0 then
        redis.call('HDEL', KEYS[1], f)
      else
        redis.call('HSET', KEYS[1], f, n)
      end
      outstanding = outstanding + n
    else
      outstanding = outstanding + n
    end
  end
end
local left = 0
for i = 3, #KEYS do
  local n = tonumber(redis.call('GET', KEYS[i]))
  if not n then
    return {-1, 0, 0, 0}
  end
  if n > 0 then
    left = left + n
  end
end
local cap = left + math.ceil(left * tonumber(ARGV[3]) / 100)
local allowed = cap - outstanding
if allowed <= 0 then
  return {0, 0, left, outstanding}
end
-- several instances share what is left near the end: none takes more than a quarter of it
local grant = math.min(tonumber(ARGV[1]), math.max(1, math.floor(allowed / 4)))
-- a block's tokens expire at the end of their lifetime rounded down to a step (a second, or a
-- tenth of the lifetime if shorter: never later than a token issued now would), so the blocks
-- of one step share a field
local ttl = tonumber(ARGV[2])
local step = math.max(1, math.min(1000, math.floor(ttl / 10)))
local exp = math.floor((now + ttl) / step) * step
-- and never before the sale's token floor (tokens expiring before it are void: issued before
-- its last rebuild), which a rebuild in the last step sets later than the rounded expiry
exp = math.max(exp, tonumber(m[3] or '0'))
redis.call('HINCRBY', KEYS[1], exp, grant)
redis.call('HSET', KEYS[1], 'epoch', m[1])
redis.call('PEXPIRE', KEYS[1], ttl + 1000)
return {grant, exp, left, outstanding + grant}
