-- claim: the writer claims a batch's reservations of one item before writing them to Postgres.
-- A claimed reservation can no longer be released (release.lua answers 2), so a publish whose
-- outcome was unknown and the writer cannot both act on the same order: exactly one wins.
-- KEYS[1] {item:N}:stock, KEYS[2] {item:N}:inflight
-- ARGV order ids
-- Returns a list: 1 claimed (or already claimed), 0 not in flight (released: do not write it).
-- If the stock key is missing (Redis lost its data) Redis cannot tell, and every order counts
-- as claimed: the queue holds acknowledged orders and they must reach Postgres.
local out = {}
local known = redis.call('EXISTS', KEYS[1]) == 1
for i = 1, #ARGV do
  if not known then
    out[i] = 1
  else
    local v = redis.call('HGET', KEYS[2], ARGV[i])
    if not v then
      out[i] = 0
    else
      if string.sub(v, -2) ~= ':c' then
        redis.call('HSET', KEYS[2], ARGV[i], v .. ':c')
      end
      out[i] = 1
    end
  end
end
return out
