-- reserve: the whole check-and-reserve of one purchase attempt, atomically, on Redis's clock.
-- Every key of a sale shares the hash tag {sale:S}, so the one-per-shopper rule of the whole sale
-- and the single use of a purchase token hold in one call (and one Redis Cluster slot).
-- KEYS[1] {sale:S}:meta       hash: seq, lost, limit, starts, ends, tokfloor (tokens expiring
--                             before it are void), paused ('1': the merchant paused the sale),
--                             missing = not loaded
-- KEYS[2] {sale:S}:stock:I    units left of item I
-- KEYS[3] {sale:S}:buyers     hash: shopper ("U", or "I:U" when the limit is per item) -> order id
-- KEYS[4] {sale:S}:inflight   hash: order id -> "I:U:reservedAtMillis:seq" (":c" once claimed)
-- KEYS[5] {sale:S}:tok:NONCE  the attempt a purchase token was used for
-- KEYS[6] {sale:S}:tokens     hash: the token budget (tokens.lua): a token used here, whatever
--                             its attempt's outcome, is taken off its expiry's field
-- KEYS[7] {sale:S}:entrants   hash: shopper (as in buyers) -> order id of their draw entry
-- KEYS[8] {sale:S}:draw       hash: order id -> "I:U:enteredAtMillis", the entries not yet decided
--                             (KEYS[7] and KEYS[8] are sent with ARGV[7] only: by an attempt that may
--                             fall in a draw window)
-- ARGV[1] user id, ARGV[2] order id, ARGV[3] item id, ARGV[4] token expiry (unix ms),
-- ARGV[5] the highest reservation seq this instance has seen in this shard of the sale,
-- ARGV[6] '1' when the caller may borrow units from other shards of a sharded sale (absent: '0')
-- ARGV[7] '1' when the attempt may fall in a draw window (a sale with a fair start only; absent or
--         '': not sent as an entry). The draw ranks entries by their order ids, when it is decided.
-- Returns {code, seq, nowMillis, orderIdHeld}: code >= 0 is a reservation (the units left);
--   -1 sold out, -2 already a buyer (orderIdHeld names the order), -3 not loaded or data lost
--   (fail closed), -4 token used, expired or void, -5 Redis went back in time (data lost: the
--   sale is marked lost), -6 not started, -7 ended, -8 paused by the merchant (the token is kept),
--   -9 (ARGV[6] '1' only) this shard has no unit of the item: nothing attempted, the token is kept;
--   the caller borrows from the other shards and asks again with ARGV[6] '0'.
-- A sale with a fair start (meta fair: the end of its draw window, unix ms; drawn: '1' once its
-- draw is decided and applied here):
--   -12 inside the window: the attempt entered the draw (no unit taken; KEYS[7], KEYS[8]; the
--       seq moves, as for a reservation); the caller publishes the entry. A second entry of the
--       shopper is -2 naming the first.
--   -13 after the window, before the draw is applied here: nothing attempted, the token is kept.
--   -14 inside the window without ARGV[7] (and KEYS[7..8]): nothing attempted, the token is kept;
--       ask with ARGV[7] and those keys.
-- The same attempt sent again (same token, same order id: the client's retry after a lost reply,
-- or the shopper's page resending a purchase whose answer was lost; the caller derives the order
-- id from the token and the item) gets the same answer. A refusal is answered as recorded; a
-- reservation, by what became of it since:
--   -10 its order is durable: the writer has claimed it from the queue (seq and time of the
--       reservation), or has written it and the shopper still holds it in buyers (seq 0);
--       orderIdHeld names it. Nothing to publish.
--   -11 it is still in flight, not claimed (seq and time of the reservation): the first send may
--       or may not have queued it, so the caller publishes it again and claims it before it
--       answers, and never releases it (the first send may have answered 202 for it).
--   -4  it is gone (released: its publish failed, or orphan recovery): not made again.
local m = redis.call('HMGET', KEYS[1], 'seq', 'lost', 'limit', 'starts', 'ends', 'tokfloor', 'paused', 'fair', 'drawn')
if not m[1] or m[2] == '1' then
  return {-3, 0, 0, ''}
end
if m[7] == '1' then
  return {-8, 0, 0, ''}
end
local seq = tonumber(m[1])
if seq < tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[1], 'lost', '1')
  return {-5, 0, 0, ''}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = tonumber(ARGV[4])
if now >= exp or exp < tonumber(m[6] or '0') then
  return {-4, 0, now, ''}
end
if now < tonumber(m[4]) then
  return {-6, 0, now, ''}
end
if now >= tonumber(m[5]) then
  return {-7, 0, now, ''}
end
local entering = false
if m[8] and m[8] ~= '0' and m[9] ~= '1' then
  if now >= tonumber(m[8]) then
    return {-13, 0, now, ''}
  end
  if not ARGV[7] or ARGV[7] == '' or not KEYS[8] then
    return {-14, 0, now, ''}
  end
  entering = true
end
local member = ARGV[1]
if m[3] == 'per-item' then
  member = ARGV[3] .. ':' .. ARGV[1]
end
-- Consume the token: it now names this attempt (one write, whatever the outcome).
local prev = redis.call('SET', KEYS[5], ARGV[2], 'NX', 'GET', 'PX', exp - now + 1000)
if prev then
  if prev == ARGV[2] then
    -- the same attempt sent again: it reserved; answer by what became of the reservation
    local v = redis.call('HGET', KEYS[4], ARGV[2])
    if v then
      local at, s = string.match(v, '^[^:]+:[^:]+:([^:]+):([^:]+)')
      if string.sub(v, -2) == ':c' then
        return {-10, tonumber(s), tonumber(at), ARGV[2]}
      end
      return {-11, tonumber(s), tonumber(at), ARGV[2]}
    end
    if redis.call('HGET', KEYS[3], member) == ARGV[2] then
      return {-10, 0, now, ARGV[2]} -- written (settled), still the shopper's
    end
    return {-4, 0, now, ''}
  end
  local id, code, at, held = string.match(prev, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
  if id == ARGV[2] then
    return {tonumber(code), 0, tonumber(at), held}
  end
  return {-4, 0, now, ''}
end
-- spent takes the token off the budget (KEYS[6]): called once the attempt is decided (a token
-- kept for a retry, -3 and -9 below, stays counted until it is used or expires)
local function spent()
  if redis.call('HINCRBY', KEYS[6], ARGV[4], -1) <= 0 then
    redis.call('HDEL', KEYS[6], ARGV[4])
  end
end
local function refuse(code, held)
  redis.call('SET', KEYS[5], ARGV[2] .. '|' .. code .. '|' .. now .. '|' .. held, 'XX', 'KEEPTTL')
  spent()
  return {code, 0, now, held}
end
local held = redis.call('HGET', KEYS[3], member)
if held then
  return refuse(-2, held)
end
local left = tonumber(redis.call('GET', KEYS[2]))
if not left then
  redis.call('DEL', KEYS[5]) -- the item is not loaded: nothing was attempted
  return {-3, 0, now, ''}
end
if entering then
  held = redis.call('HGET', KEYS[7], member)
  if held then
    return refuse(-2, held)
  end
  if left <= 0 and ARGV[6] ~= '1' then
    return refuse(-1, '') -- no unit of it in the sale: nothing to draw
  end
  redis.call('HSET', KEYS[7], member, ARGV[2])
  redis.call('HSET', KEYS[8], ARGV[2], ARGV[3] .. ':' .. ARGV[1] .. ':' .. now)
  -- the same attempt sent again answers -12 again (its entry is published again; the writer
  -- keeps one)
  refuse(-12, '')
  -- an entry moves the counter as a reservation does: a Redis that lost it (a failover, an AOF
  -- a second old) is then behind the floors and Postgres, and found out
  seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
  return {-12, seq, now, ''}
end
if left <= 0 then
  if ARGV[6] == '1' then
    redis.call('DEL', KEYS[5]) -- nothing attempted: the token stays unused for the retry
    return {-9, 0, now, ''}
  end
  return refuse(-1, '')
end
left = redis.call('DECR', KEYS[2])
seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
spent()
redis.call('HSET', KEYS[3], member, ARGV[2])
redis.call('HSET', KEYS[4], ARGV[2], ARGV[3] .. ':' .. ARGV[1] .. ':' .. now .. ':' .. seq)
return {left, seq, now, ''}
