-- adjust: a merchant's edit of a loaded sale, applied to Redis atomically (keys of one sale only).
-- Run while the edit's Postgres transaction holds the sale's and items' rows, before it commits.
-- KEYS[1] {sale:S}:meta, KEYS[2] {sale:S}:adj:ID, the mark of this edit step (ID names the edit
-- and, in a sharded sale, its step), KEYS[3..] {sale:S}:stock:I of each item changed or added
-- ARGV[1] P, the number of meta fields to set, then P pairs (field, value): starts, ends (unix ms),
-- limit, paused ('1' or '0'); then, per stock key, a pair (delta, initial): an existing stock key
-- moves by delta; a missing one is set to initial (an added item), unless initial is ''.
-- An applied step sets KEYS[2] for 15 minutes: the same step sent again (go-redis resends a
-- script whose reply it lost, on EOF or a read timeout, after Redis ran it) changes nothing.
-- Returns {1} when applied, {2} when KEYS[2] says it was applied before (nothing done now), {0}
-- when the sale is not loaded or marked lost (nothing done: the next load reads Postgres),
-- {-1, k, left} when the k-th stock key (1-based) holds fewer units than the decrease asks (they
-- are sold or held by reservations in flight): nothing done.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {2}
end
local m = redis.call('HMGET', KEYS[1], 'seq', 'lost')
if not m[1] or m[2] == '1' then
  return {0}
end
local p = tonumber(ARGV[1])
local base = 2 + 2 * p
local levels = {}
for i = 3, #KEYS do
  local d = tonumber(ARGV[base + 2 * (i - 3)])
  local v = redis.call('GET', KEYS[i])
  levels[i] = v
  if v and tonumber(v) + d < 0 then
    return {-1, i - 2, tonumber(v)}
  end
end
for i = 3, #KEYS do
  local d = tonumber(ARGV[base + 2 * (i - 3)])
  local init = ARGV[base + 2 * (i - 3) + 1]
  if levels[i] then
    if d ~= 0 then
      redis.call('INCRBY', KEYS[i], d)
    end
  elseif init ~= '' then
    redis.call('SET', KEYS[i], init)
  end
end
if p > 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 2, 1 + 2 * p))
end
redis.call('SET', KEYS[2], '1', 'EX', 900)
return {1}
