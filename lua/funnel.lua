-- funnel: adds one instance's purchase funnel counts of the last second to a sale's totals and to
-- its per-second series (services/funnel.go flushes them once a second, off the purchase path).
-- KEYS[1] {sale:S}:funnel (hash: field -> count), KEYS[2] {sale:S}:series (hash: 'a:T' accepted
-- and 'r:T' refused in second T), KEYS[3] {sale:S}:seriesidx (sorted set of the seconds T held)
-- ARGV[1] T (unix seconds), ARGV[2] how many seconds the series keeps, ARGV[3] the keys' TTL in
-- seconds, ARGV[4] accepted in T, ARGV[5] refused in T, then (field, delta) pairs for the totals.
-- KEYS[4], when given, {sale:S}:fl:ID marks the flush ID as applied for 15 minutes, so a flush
-- sent again after its reply was lost (a timeout after Redis ran it) adds nothing the second time.
-- Returns the number of seconds dropped from the series, or -1 when KEYS[4] was applied before.
if KEYS[4] then
  if not redis.call('SET', KEYS[4], '1', 'NX', 'EX', 900) then
    return -1
  end
end
local t = tonumber(ARGV[1])
local keep = tonumber(ARGV[2])
for i = 6, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
local a, r = tonumber(ARGV[4]), tonumber(ARGV[5])
if a > 0 then
  redis.call('HINCRBY', KEYS[2], 'a:' .. ARGV[1], a)
end
if r > 0 then
  redis.call('HINCRBY', KEYS[2], 'r:' .. ARGV[1], r)
end
if a > 0 or r > 0 then
  redis.call('ZADD', KEYS[3], t, ARGV[1])
end
-- The series is capped: seconds older than `keep` before T go.
local cut = '(' .. string.format('%d', t - keep)
local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', cut)
for _, s in ipairs(old) do
  redis.call('HDEL', KEYS[2], 'a:' .. s, 'r:' .. s)
end
if #old > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', cut)
end
for i = 1, 3 do
  redis.call('EXPIRE', KEYS[i], ARGV[3])
end
return #old
