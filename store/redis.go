package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/lua"
	"github.com/flashsale/flashsale/shop"
)

// Refusals the reserve script can answer instead of a reservation.
var (
	ErrSoldOut          = errors.New("sold out")
	ErrAlreadyBuyer     = errors.New("already a buyer")
	ErrStockUnknown     = errors.New("sale not loaded in redis, or its data was lost")
	ErrTokenAlreadyUsed = errors.New("purchase token already used, expired or void")
	ErrRedisWentBack    = errors.New("redis lost reservations (its counter went back); the sale is rebuilt from postgres")
	ErrNotStarted       = errors.New("the sale has not started (redis clock)")
	ErrEnded            = errors.New("the sale has ended (redis clock)")
	ErrPaused           = errors.New("the merchant paused the sale")
)

// Stock keeps the hot state of every sale in Redis: remaining units per item, buyers, reservations
// in flight, used purchase tokens and the tombstones of units given back. All keys of one sale
// share the hash tag {sale:S}, so each script touches one slot (one Redis Cluster shard per sale).
type Stock struct {
	rdb      redis.UniversalClient
	reserve  *redis.Script
	release  *redis.Script
	load     *redis.Script
	claim    *redis.Script
	markLost *redis.Script
	adjust   *redis.Script
	funnel   *redis.Script
	transfer *redis.Script
	shards   shardCache
}

// NewStock returns a Stock on rdb; scripts run with EVALSHA and fall back to EVAL on NOSCRIPT.
func NewStock(rdb redis.UniversalClient) *Stock {
	return &Stock{
		rdb:      rdb,
		reserve:  redis.NewScript(lua.Reserve),
		release:  redis.NewScript(lua.Release),
		load:     redis.NewScript(lua.Load),
		claim:    redis.NewScript(lua.Claim),
		markLost: redis.NewScript(lua.MarkLost),
		adjust:   redis.NewScript(lua.Adjust),
		funnel:   redis.NewScript(lua.Funnel),
		transfer: redis.NewScript(lua.Transfer),
	}
}

// OpenRedis connects to Redis and checks it answers. A redis:// or rediss:// URL
// (redis://host:port/db) is one Redis; a redis-cluster:// or rediss-cluster:// URL
// (redis-cluster://host1:7000,host2:7001,host3:7002) is a Redis Cluster, reached through the
// seed nodes listed (any of them will do: the client learns the others from it). poolSize is the
// connection pool of the one Redis, or of each node of a cluster.
func OpenRedis(ctx context.Context, url string, poolSize int) (redis.UniversalClient, error) {
	if IsClusterURL(url) {
		return openCluster(ctx, url, poolSize)
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	if poolSize > 0 {
		opt.PoolSize = poolSize
	}
	opt.Protocol = protocolOf(url)
	opt.DialTimeout = 2 * time.Second
	opt.ReadTimeout = 2 * time.Second
	opt.WriteTimeout = 2 * time.Second
	rdb := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis %s: %w", opt.Addr, err)
	}
	return rdb, nil
}

// protocolOf is the RESP version to speak: 2 unless the URL asks otherwise (?protocol=3). Nothing
// here uses RESP3's push messages, and with RESP3 go-redis inspects every reply for them first:
// a few percent of a rush's CPU for nothing.
func protocolOf(url string) int {
	_, query, _ := strings.Cut(url, "?")
	for _, kv := range strings.Split(query, "&") {
		if v, ok := strings.CutPrefix(kv, "protocol="); ok && v == "3" {
			return 3
		}
	}
	return 2
}

// The URL schemes of a Redis Cluster (with TLS: rediss-cluster).
const (
	ClusterScheme    = "redis-cluster"
	ClusterTLSScheme = "rediss-cluster"
)

// IsClusterURL reports whether url names a Redis Cluster (redis-cluster:// or rediss-cluster://).
func IsClusterURL(url string) bool {
	return strings.HasPrefix(url, ClusterScheme+"://") || strings.HasPrefix(url, ClusterTLSScheme+"://")
}

// ParseClusterURL reads a Redis Cluster URL:
//
//	redis-cluster://[user:password@]host1:port1[,host2:port2...][/][?option=value&...]
//
// rediss-cluster:// is the same over TLS. The hosts are seed nodes; a port left out is 6379. The
// options are go-redis's cluster URL options (redis.ParseClusterURL: dial_timeout, pool_size,
// max_redirects, addr for more seeds, ...). A cluster has one database: no /db path.
func ParseClusterURL(raw string) (*redis.ClusterOptions, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != ClusterScheme && scheme != ClusterTLSScheme) {
		return nil, fmt.Errorf("redis cluster url: want %s://host1:port1,host2:port2,... or %s://...", ClusterScheme, ClusterTLSScheme)
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	path, query, _ := strings.Cut(tail, "?")
	if strings.Contains(path, "#") || strings.Contains(query, "#") {
		return nil, errors.New("redis cluster url: a fragment (#) means nothing here")
	}
	if path != "" && path != "/" {
		return nil, fmt.Errorf("redis cluster url: %q: a Redis Cluster has only database 0, leave the path out", path)
	}
	userinfo, hostlist := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hostlist = authority[:i+1], authority[i+1:]
	}
	var seeds []string
	for _, h := range strings.Split(hostlist, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, fmt.Errorf("redis cluster url: empty host in %q (want host1:port1,host2:port2,...)", hostlist)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			if strings.Contains(err.Error(), "missing port") {
				host, port = strings.Trim(h, "[]"), "6379"
			} else {
				return nil, fmt.Errorf("redis cluster url: seed %q: %w", h, err)
			}
		}
		if host == "" {
			return nil, fmt.Errorf("redis cluster url: seed %q has no host", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("redis cluster url: seed %q: bad port %q", h, port)
		}
		seeds = append(seeds, net.JoinHostPort(host, port))
	}
	plain := "redis"
	if scheme == ClusterTLSScheme {
		plain = "rediss"
	}
	q := query
	for _, s := range seeds[1:] {
		if q != "" {
			q += "&"
		}
		q += "addr=" + neturl.QueryEscape(s)
	}
	u := plain + "://" + userinfo + seeds[0]
	if q != "" {
		u += "/?" + q
	}
	opt, err := redis.ParseClusterURL(u)
	if err != nil {
		return nil, fmt.Errorf("redis cluster url: %w", err)
	}
	return opt, nil
}

// openCluster connects to a Redis Cluster and checks that every master answers.
func openCluster(ctx context.Context, url string, poolSize int) (redis.UniversalClient, error) {
	opt, err := ParseClusterURL(url)
	if err != nil {
		return nil, err
	}
	// Every command goes to the master of its slot: a replica may lag behind (asynchronous
	// replication), and the purchase path must never read a stale buyer or stock.
	opt.ReadOnly, opt.RouteByLatency, opt.RouteRandomly = false, false, false
	if opt.MaxRedirects == 0 {
		// MOVED/ASK while slots migrate (followed at once), and the retries of a call that got
		// no answer (with backoff; the slot map is re-read meanwhile, see reloadOnFailure).
		opt.MaxRedirects = 3
	}
	if opt.DialerRetries == 0 {
		// A dead node refuses at once: no use dialing it 5 times per try (go-redis's default)
		// before the retry that goes to the promoted replica. A purchase on a sale whose master
		// is down answers 503 after some 50 ms (on loopback) rather than seconds.
		opt.DialerRetries = 1
	}
	if poolSize > 0 {
		opt.PoolSize = poolSize // per node
	}
	opt.Protocol = protocolOf(url)
	opt.DialTimeout = 2 * time.Second
	opt.ReadTimeout = 2 * time.Second
	opt.WriteTimeout = 2 * time.Second
	// go-redis re-reads the slot map on MOVED/ASK, and otherwise once a minute: after a master
	// died and its replica took over, commands would keep going to the dead address for up to
	// that minute. A call to a node that fails makes it re-read the map at once
	// (reloadOnFailure), so the command's own retries (MaxRedirects, with backoff) reach the
	// promoted replica; the periodic re-read is shortened too.
	opt.ClusterStateReloadInterval = 10 * time.Second
	rdb := redis.NewClusterClient(opt)
	rdb.OnNewNode(func(node *redis.Client) { node.AddHook(reloadOnFailure{rdb}) })
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = rdb.ForEachMaster(pctx, func(ctx context.Context, m *redis.Client) error {
		if err := m.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("master %s: %w", m.Options().Addr, err)
		}
		return nil
	})
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis cluster %s: %w", strings.Join(opt.Addrs, ","), err)
	}
	return rdb, nil
}

// reloadOnFailure has a cluster client re-read the slot map (a lazy, rate-limited CLUSTER SLOTS)
// after a call that failed without an answer from Redis (a node unreachable, a timeout) or was
// refused with CLUSTERDOWN: the node may have died and a replica may be taking over its slots.
type reloadOnFailure struct{ c *redis.ClusterClient }

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(err)
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(err)
		return err
	}
}

func (h reloadOnFailure) check(err error) {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return
	}
	var re redis.Error
	if errors.As(err, &re) && !strings.HasPrefix(re.Error(), "CLUSTERDOWN") {
		return // an answer: the node is alive
	}
	h.c.ReloadState(context.Background())
}

func saleTag(saleID int64) string { return "{sale:" + strconv.FormatInt(saleID, 10) + "}" }

// MetaKey is the hash of a sale's Redis state: seq (the reservation counter), epoch (of the last
// rebuild), limit, starts, ends, loadedAt, lost, tokfloor, fence. Missing: the sale is not loaded.
func MetaKey(saleID int64) string { return saleTag(saleID) + ":meta" }

// StockKey is the Redis key holding an item's remaining units.
func StockKey(saleID, itemID int64) string {
	return saleTag(saleID) + ":stock:" + strconv.FormatInt(itemID, 10)
}

// BuyersKey is the Redis hash of a sale's shoppers holding a unit (member -> order id).
func BuyersKey(saleID int64) string { return saleTag(saleID) + ":buyers" }

// InFlightKey is the Redis hash of a sale's reservations not yet written to Postgres.
func InFlightKey(saleID int64) string { return saleTag(saleID) + ":inflight" }

// GoneKey is the Redis set of a sale's order ids whose unit went back (tombstones).
func GoneKey(saleID int64) string { return saleTag(saleID) + ":gone" }

func tokenKey(saleID int64, shard int, nonce string) string {
	return shardTag(saleID, shard) + ":tok:" + nonce
}

// BuyerMember is how a shopper is named in a sale's buyers hash under a purchase limit.
func BuyerMember(limit string, itemID, userID int64) string {
	if limit == shop.LimitPerItem {
		return strconv.FormatInt(itemID, 10) + ":" + strconv.FormatInt(userID, 10)
	}
	return strconv.FormatInt(userID, 10)
}

// Attempt is one purchase attempt as the reserve script sees it.
type Attempt struct {
	SaleID, ItemID, UserID int64
	OrderID                string
	Nonce                  string    // the purchase token's nonce: one attempt per token
	TokenExpires           time.Time // checked against Redis's clock
	Floor                  int64     // the highest reservation seq this instance saw in the shopper's shard of the sale
}

// Reservation is what the reserve script granted, or the refusal's details.
type Reservation struct {
	Left       int64     // units left after it
	Seq        int64     // the sale's reservation counter value
	ReservedAt time.Time // Redis's clock
	HeldOrder  string    // with ErrAlreadyBuyer: the order the shopper holds
	RetryAfter time.Duration
	Shard      int  // the shopper's shard (0 in a sale of one shard)
	Borrowed   bool // the shopper's shard ran dry and borrowed units from the others
	AllEmpty   bool // with ErrSoldOut: no shard holds a unit and none is in transit
	// Lender and LenderSeq: the shard a borrow took units from and its seq after that step (0:
	// no units taken). The caller keeps it as its floor of that shard: a failover that lost the
	// step leaves the shard's counter below it, and the reserve script refuses there (-5).
	Lender    int
	LenderSeq int64
	// Again: the same attempt (same token, same order id) was made before and reserved; this
	// answer is about that reservation (reserve.lua's -10 and -11), no unit was taken now.
	// Durable: with Again, the writer holds its order (claimed from the queue, or written): it
	// needs no publish. Without Durable it is still in flight, perhaps not queued: whoever
	// answers for it publishes it again and claims it, and must never release it (the first
	// send may have answered 202 for it).
	Again, Durable bool
}

// Reserve runs the reserve script: it consumes the purchase token and, if the shopper is not yet
// a buyer and a unit is left, takes the unit and registers the order in flight. It returns one of
// the Err refusals above otherwise. Sending the same attempt (same order id) again returns the
// same refusal, or, for an attempt that reserved, its reservation with Again set (Durable once
// the writer holds it), or ErrTokenAlreadyUsed once its unit went back; so a retry after a lost
// reply cannot take a second unit, nor bring back a released one.
//
// In a sharded sale the attempt runs in the shopper's shard; when that shard has no unit of the
// item left, units are borrowed from the shard holding the most (a logged transfer) and the
// attempt runs once more in the shopper's shard.
func (s *Stock) Reserve(ctx context.Context, a Attempt) (Reservation, error) {
	k, err := s.shards.get(ctx, a.SaleID)
	if err != nil {
		return Reservation{}, fmt.Errorf("reserve(sale %d, item %d): %w", a.SaleID, a.ItemID, err)
	}
	shard := ShardOf(a.UserID, k)
	r, code, err := s.reserveIn(ctx, a, shard, k > 1)
	if err == nil && code == -9 {
		moved, lent, berr := s.borrow(ctx, a.SaleID, k, shard, a.ItemID)
		r, code, err = s.reserveIn(ctx, a, shard, false)
		r.Borrowed = moved
		r.Lender, r.LenderSeq = lent.From, lent.Seq
		if err != nil {
			err = errors.Join(err, berr)
		}
	}
	if err != nil {
		return Reservation{}, err
	}
	switch code {
	case -1:
		r.AllEmpty = true
		if k > 1 {
			// Sold out in this shard: sold out everywhere only if no shard holds a unit and
			// none is in transit. Unknown (an error) counts as not sold out everywhere.
			r.AllEmpty, _ = s.allEmpty(ctx, a.SaleID, k, a.ItemID)
		}
		return r, ErrSoldOut
	case -2:
		return r, ErrAlreadyBuyer
	case -3:
		return r, ErrStockUnknown
	case -4:
		return r, ErrTokenAlreadyUsed
	case -5:
		if k > 1 {
			// the script marked its shard lost: a sharded sale fails closed as a whole
			if _, err := s.MarkLost(context.WithoutCancel(ctx), a.SaleID, 0, ""); err != nil {
				return r, errors.Join(ErrRedisWentBack, err)
			}
		}
		return r, ErrRedisWentBack
	case -6:
		return r, ErrNotStarted
	case -7:
		return r, ErrEnded
	case -8:
		return r, ErrPaused
	case -10, -11:
		r.Left, r.HeldOrder = 0, ""
		r.Again, r.Durable = true, code == -10
		return r, nil
	}
	if code < 0 {
		return r, fmt.Errorf("reserve: unknown code %d", code)
	}
	return r, nil
}

// reserveIn runs the reserve script in one shard; mayBorrow lets it answer -9 (the shard has no
// unit of the item: nothing attempted).
func (s *Stock) reserveIn(ctx context.Context, a Attempt, shard int, mayBorrow bool) (Reservation, int64, error) {
	keys := []string{MetaKeyOf(a.SaleID, shard), StockKeyOf(a.SaleID, shard, a.ItemID), BuyersKeyOf(a.SaleID, shard),
		InFlightKeyOf(a.SaleID, shard), tokenKey(a.SaleID, shard, a.Nonce)}
	args := []any{a.UserID, a.OrderID, a.ItemID, a.TokenExpires.UnixMilli(), a.Floor}
	if mayBorrow {
		args = append(args, "1")
	}
	v, err := s.reserve.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		return Reservation{}, 0, fmt.Errorf("reserve(sale %d, item %d): %w", a.SaleID, a.ItemID, err)
	}
	if len(v) != 4 {
		return Reservation{}, 0, fmt.Errorf("reserve(sale %d, item %d): unexpected reply %v", a.SaleID, a.ItemID, v)
	}
	code, _ := v[0].(int64)
	seq, _ := v[1].(int64)
	at, _ := v[2].(int64)
	held, _ := v[3].(string)
	return Reservation{Left: code, Seq: seq, ReservedAt: time.UnixMilli(at), HeldOrder: held, Shard: shard}, code, nil
}

// ReleaseOutcome tells what a release did.
type ReleaseOutcome int

// The outcomes of Release.
const (
	// NotInFlight: nothing to do (already released, returned or written).
	NotInFlight ReleaseOutcome = iota
	// Released: the unit went back now.
	Released
	// Claimed: the writer holds the order from the queue; it will be written, not released.
	Claimed
	// RetryLater: ReturnUnit on a sale Redis does not hold healthy (not loaded, or lost): its
	// rebuild from Postgres will count the unit; keep the return until then.
	RetryLater
)

// Release runs one release operation for an order. Idempotent: the unit goes back at most once.
// In a sharded sale it runs in the shopper's shard, where the reservation was made.
func (s *Stock) Release(ctx context.Context, o shop.OrderRef, op shop.ReleaseOp) (ReleaseOutcome, error) {
	keys, err := s.releaseKeys(ctx, o)
	if err != nil {
		return NotInFlight, releaseErr(o, op, err)
	}
	n, err := s.release.Run(ctx, s.rdb, keys, releaseArgs(o, op)...).Int64()
	if err != nil {
		return NotInFlight, releaseErr(o, op, err)
	}
	return ReleaseOutcome(n), nil
}

// releaseKeys are the release script's keys for o, in its shopper's shard.
func (s *Stock) releaseKeys(ctx context.Context, o shop.OrderRef) ([]string, error) {
	sh, err := s.ShardOfUser(ctx, o.SaleID, o.UserID)
	if err != nil {
		return nil, err
	}
	return []string{MetaKeyOf(o.SaleID, sh), StockKeyOf(o.SaleID, sh, o.ItemID), BuyersKeyOf(o.SaleID, sh), InFlightKeyOf(o.SaleID, sh), GoneKeyOf(o.SaleID, sh)}, nil
}

func releaseArgs(o shop.OrderRef, op shop.ReleaseOp) []any {
	return []any{o.OrderID, string(op), o.ItemID, o.UserID, o.HeldBy}
}

func releaseErr(o shop.OrderRef, op shop.ReleaseOp, err error) error {
	return fmt.Errorf("release %s(sale %d, order %s): %w", op, o.SaleID, o.OrderID, err)
}

// ReleaseMany is Release for many orders in pipelines of 500 (one round trip to each Redis node
// per pipeline, instead of one per order): the keeper's expiry gives back up to 500 units a
// pass. It returns an outcome and an error per order, in order: every command of a pipeline is
// sent, so on a Redis Cluster whose one node fails the others' releases still happen and are
// reported; a failed one may or may not have been released (each release is idempotent: run it
// again).
func (s *Stock) ReleaseMany(ctx context.Context, refs []shop.OrderRef, op shop.ReleaseOp) ([]ReleaseOutcome, []error) {
	const chunk = 500
	outs := make([]ReleaseOutcome, len(refs))
	errs := make([]error, len(refs))
	for i := 0; i < len(refs); i += chunk {
		j := min(len(refs), i+chunk)
		s.releasePipelined(ctx, refs[i:j], op, outs[i:j], errs[i:j])
	}
	return outs, errs
}

func (s *Stock) releasePipelined(ctx context.Context, refs []shop.OrderRef, op shop.ReleaseOp, outs []ReleaseOutcome, errs []error) {
	keys := make([][]string, len(refs))
	cmds := make([]*redis.Cmd, len(refs))
	pipe := s.rdb.Pipeline()
	for i, o := range refs {
		var err error
		if keys[i], err = s.releaseKeys(ctx, o); err != nil {
			errs[i] = releaseErr(o, op, err)
			continue
		}
		cmds[i] = s.release.EvalSha(ctx, pipe, keys[i], releaseArgs(o, op)...)
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx) // each command's own error is read below
	}
	for i, o := range refs {
		if cmds[i] == nil {
			continue
		}
		n, err := cmds[i].Int64()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// a Redis that lost its script cache (a restart, a failover): Run loads it
			n, err = s.release.Run(ctx, s.rdb, keys[i], releaseArgs(o, op)...).Int64()
		}
		if err != nil {
			errs[i] = releaseErr(o, op, err)
			continue
		}
		outs[i] = ReleaseOutcome(n)
	}
}

// Claim verdicts, per order.
const (
	ClaimGone    = 0 // its unit went back: do not write it
	ClaimClaimed = 1 // in flight, now owned by the writer
	ClaimUnknown = 2 // Redis does not know it: write it, Postgres decides
)

// ClaimItem is one order of a batch the writer claims.
type ClaimItem struct {
	OrderID string
	Seq     int64
	UserID  int64 // names the shard of a sharded sale
}

// Claim marks orders of one sale as being written by the writer and returns a verdict for each
// (ClaimGone, ClaimClaimed, ClaimUnknown). An order whose seq is above Redis's counter marks the
// sale lost: Redis went back in time.
// In a sharded sale each order is claimed in its shopper's shard (one call per shard), against
// that shard's counter.
func (s *Stock) Claim(ctx context.Context, saleID int64, orders []ClaimItem) ([]int, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("claim(sale %d): %w", saleID, err)
	}
	byShard := map[int][]int{}
	for i, o := range orders {
		sh := ShardOf(o.UserID, k)
		byShard[sh] = append(byShard[sh], i)
	}
	out := make([]int, len(orders))
	for sh, idx := range byShard {
		args := make([]any, 0, 2*len(idx))
		for _, i := range idx {
			args = append(args, orders[i].OrderID, orders[i].Seq)
		}
		res, err := s.claim.Run(ctx, s.rdb, []string{MetaKeyOf(saleID, sh), InFlightKeyOf(saleID, sh), GoneKeyOf(saleID, sh)}, args...).Int64Slice()
		if err != nil {
			return nil, fmt.Errorf("claim(sale %d): %w", saleID, err)
		}
		if len(res) != len(idx) {
			return nil, fmt.Errorf("claim(sale %d): %d verdicts for %d orders", saleID, len(res), len(idx))
		}
		for j, i := range idx {
			out[i] = int(res[j])
		}
	}
	if k > 1 {
		// A shard's claim marks that shard lost when an order's seq is above its counter: a
		// sharded sale then fails closed as a whole.
		lost := make(map[int]*redis.StringCmd, len(byShard))
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for sh := range byShard {
				lost[sh] = p.HGet(ctx, MetaKeyOf(saleID, sh), "lost")
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("claim(sale %d): %w", saleID, err)
		}
		for _, c := range lost {
			if c.Val() == "1" {
				if _, err := s.MarkLost(ctx, saleID, 0, ""); err != nil {
					return nil, err
				}
				break
			}
		}
	}
	return out, nil
}

// MarkLost fails a sale closed until it is rebuilt from Postgres. fence is the reconciliation
// lease's fencing token (0 outside the lease); atSeq, if not empty, is the counter value the
// decision was taken at (the sale is left alone if it moved on). It reports whether it marked.
//
// A sharded sale fails closed as a whole: atSeq is then the shards' counters joined by commas
// (SaleState.SeqRaw). Under a guard (fence or atSeq) every shard's guard is checked first
// (marklost.lua's check mode, which writes nothing): if any shard moved on or knows a newer
// lease holder, no shard is marked. Then each shard is marked under its guard, and once one
// shard is marked every other shard is marked too (one that moved on between the check and its
// mark included: a shard lost alone would fail the sale closed anyway).
func (s *Stock) MarkLost(ctx context.Context, saleID int64, fence int64, atSeq string) (bool, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return false, fmt.Errorf("mark lost(sale %d): %w", saleID, err)
	}
	if k == 1 {
		n, err := s.markLost.Run(ctx, s.rdb, []string{MetaKey(saleID)}, fence, atSeq).Int64()
		if err != nil {
			return false, fmt.Errorf("mark lost(sale %d): %w", saleID, err)
		}
		return n == 1, nil
	}
	seqs := strings.Split(atSeq, ",")
	atOf := func(sh int) string {
		if atSeq != "" && len(seqs) == k {
			return seqs[sh]
		}
		return ""
	}
	if fence != 0 || atSeq != "" {
		for sh := range k {
			n, err := s.markLost.Run(ctx, s.rdb, []string{MetaKeyOf(saleID, sh)}, fence, atOf(sh), "check").Int64()
			if err != nil {
				return false, fmt.Errorf("mark lost(sale %d, shard %d): %w", saleID, sh, err)
			}
			if n < 0 {
				return false, nil // this shard moved on, or a newer lease holder acted
			}
		}
	}
	marked := make([]bool, k)
	anyMarked := false
	for sh := range k {
		n, err := s.markLost.Run(ctx, s.rdb, []string{MetaKeyOf(saleID, sh)}, fence, atOf(sh)).Int64()
		if err != nil {
			return anyMarked, fmt.Errorf("mark lost(sale %d, shard %d): %w", saleID, sh, err)
		}
		marked[sh] = n == 1
		anyMarked = anyMarked || marked[sh]
	}
	if !anyMarked {
		return false, nil
	}
	for sh := range k {
		if !marked[sh] {
			if err := s.markLost.Run(ctx, s.rdb, []string{MetaKeyOf(saleID, sh)}, 0, "").Err(); err != nil {
				return true, fmt.Errorf("mark lost(sale %d, shard %d): %w", saleID, sh, err)
			}
		}
	}
	return true, nil
}

// Settle removes orders that Postgres now holds from the in-flight registers, in one round trip.
func (s *Stock) Settle(ctx context.Context, bySale map[int64][]string) error {
	if len(bySale) == 0 {
		return nil
	}
	ks := map[int64]int{}
	for sale, ids := range bySale {
		if len(ids) > 0 {
			k, err := s.shards.get(ctx, sale)
			if err != nil {
				return fmt.Errorf("settle: %w", err)
			}
			ks[sale] = k
		}
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sale, ids := range bySale {
			if len(ids) > 0 {
				// the order ids alone do not name their shard: each shard forgets them
				for sh := range ks[sale] {
					p.HDel(ctx, InFlightKeyOf(sale, sh), ids...)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

// Snapshot is a sale's state as Postgres sees it, to (re)build Redis from.
type Snapshot struct {
	SaleID   int64
	Epoch    int64 // bumped in Postgres for this rebuild
	Limit    string
	StartsAt time.Time
	EndsAt   time.Time
	MaxSeq   int64           // the highest reservation seq of the orders written
	Left     map[int64]int64 // item id -> quantity - live orders
	Quantity map[int64]int64 // item id -> quantity, as the snapshot read it
	Items    []int64         // item ids, in order
	Buyers   map[string]string
	Gone     []string // orders whose unit Postgres gave back and Redis may not have yet
	Paused   bool
	Shards   int // the sale's stock shards (0 is taken as 1)
}

// Load (re)builds a sale's keys from a Postgres snapshot when the sale is not loaded or marked
// lost, unless a rebuild of an equal or newer epoch already ran. voidTokens > 0 voids the
// purchase tokens issued before now (a rebuild after data loss: their use marks may be gone).
// It reports whether it loaded now.
//
// A sharded sale is loaded shard by shard, each with its part of every item's units (an even
// split, the remainder to the lowest shards), the buyers pinned to it and every tombstone, all at
// the snapshot's epoch. Unless every shard is held healthy (then nothing is done), the shards of
// an older load are first marked lost, so none of them sells or lends units of the old state
// while the others are replaced; after the load every shard must hold this epoch, else the sale
// is marked lost again for the next rebuild (another instance's load interleaved).
func (s *Stock) Load(ctx context.Context, snap Snapshot, voidTokens time.Duration) (bool, error) {
	k := max(snap.Shards, 1)
	s.RememberShards(snap.SaleID, k)
	if k == 1 {
		return s.loadShard(ctx, snap, 0, 1, snap.Buyers, voidTokens)
	}
	states, err := s.shardStates(ctx, snap.SaleID, k)
	if err != nil {
		return false, err
	}
	healthy := true
	for _, st := range states {
		healthy = healthy && st.Loaded && !st.Lost
	}
	if healthy {
		return false, nil
	}
	for sh, st := range states {
		if st.Loaded && !st.Lost && st.Epoch < snap.Epoch {
			if err := s.markLost.Run(ctx, s.rdb, []string{MetaKeyOf(snap.SaleID, sh)}, 0, "").Err(); err != nil {
				return false, fmt.Errorf("load(sale %d, shard %d): %w", snap.SaleID, sh, err)
			}
		}
	}
	buyers := make([]map[string]string, k)
	for sh := range buyers {
		buyers[sh] = map[string]string{}
	}
	for m, o := range snap.Buyers {
		u, _ := strconv.ParseInt(m[strings.LastIndexByte(m, ':')+1:], 10, 64)
		buyers[ShardOf(u, k)][m] = o
	}
	loaded := false
	for sh := range k {
		ok, err := s.loadShard(ctx, snap, sh, k, buyers[sh], voidTokens)
		if err != nil {
			return false, err
		}
		loaded = loaded || ok
	}
	if states, err = s.shardStates(ctx, snap.SaleID, k); err != nil {
		return false, err
	}
	for _, st := range states {
		if !st.Loaded || st.Lost || st.Epoch != snap.Epoch {
			// Shards of different loads: fail the sale closed, the next rebuild loads them all.
			if _, err := s.MarkLost(ctx, snap.SaleID, 0, ""); err != nil {
				return false, err
			}
			return false, nil
		}
	}
	return loaded, nil
}

// loadShard runs the load script on one shard of k.
func (s *Stock) loadShard(ctx context.Context, snap Snapshot, sh, k int, buyers map[string]string, voidTokens time.Duration) (bool, error) {
	keys := []string{MetaKeyOf(snap.SaleID, sh), BuyersKeyOf(snap.SaleID, sh), InFlightKeyOf(snap.SaleID, sh), GoneKeyOf(snap.SaleID, sh),
		XferKeyOf(snap.SaleID, sh), XferInKeyOf(snap.SaleID, sh)}
	args := make([]any, 0, 8+len(snap.Items)+2*len(buyers)+len(snap.Gone))
	paused := "0"
	if snap.Paused {
		paused = "1"
	}
	args = append(args, snap.Epoch, snap.Limit, snap.StartsAt.UnixMilli(), snap.EndsAt.UnixMilli(), snap.MaxSeq, voidTokens.Milliseconds(), len(buyers), paused)
	for _, it := range snap.Items {
		keys = append(keys, StockKeyOf(snap.SaleID, sh, it))
		args = append(args, SplitUnits(snap.Left[it], k)[sh])
	}
	for m, o := range buyers {
		args = append(args, m, o)
	}
	for _, g := range snap.Gone {
		args = append(args, g)
	}
	n, err := s.load.Run(ctx, s.rdb, keys, args...).Int64()
	if err != nil {
		return false, fmt.Errorf("load(sale %d, shard %d): %w", snap.SaleID, sh, err)
	}
	return n == 1, nil
}

// SaleState is a sale's Redis meta: whether it is loaded and healthy, and its counters.
//
// For a sharded sale it is every shard's meta together: loaded when every shard is, lost when
// any is; Seq is the lowest shard counter, ShardSeqs each one, SeqRaw them all joined by commas.
type SaleState struct {
	Loaded   bool
	Lost     bool
	Seq      int64
	SeqRaw   string
	Epoch    int64
	Limit    string
	LoadedAt time.Time
	Shards   int  // the sale's stock shards (1: not sharded)
	Partial  bool // sharded only: some shards hold the sale and others do not
	Mixed    bool // sharded only: the shards holding the sale hold different epochs (a load under way)
}

// ShardSeqs returns each shard's reservation counter (one value for a sale of one shard).
func (st SaleState) ShardSeqs() []int64 {
	parts := strings.Split(st.SeqRaw, ",")
	out := make([]int64, len(parts))
	for i, p := range parts {
		out[i], _ = strconv.ParseInt(p, 10, 64)
	}
	return out
}

func parseMeta(m map[string]string) SaleState {
	if len(m) == 0 {
		return SaleState{}
	}
	st := SaleState{Loaded: true, Lost: m["lost"] == "1", SeqRaw: m["seq"], Limit: m["limit"]}
	st.Seq, _ = strconv.ParseInt(m["seq"], 10, 64)
	st.Epoch, _ = strconv.ParseInt(m["epoch"], 10, 64)
	if ms, err := strconv.ParseInt(m["loadedAt"], 10, 64); err == nil {
		st.LoadedAt = time.UnixMilli(ms)
	}
	return st
}

// combine folds the states of a sale's shards into one.
func combine(states []SaleState) SaleState {
	if len(states) == 1 {
		return states[0]
	}
	st := states[0]
	st.Shards = len(states)
	raw := make([]string, len(states))
	some := false
	epoch := int64(-1) // the first loaded shard's
	for i, x := range states {
		if x.Loaded {
			st.Mixed = st.Mixed || (epoch >= 0 && x.Epoch != epoch)
			if epoch < 0 {
				epoch = x.Epoch
			}
		}
		st.Loaded = st.Loaded && x.Loaded
		st.Lost = st.Lost || x.Lost
		st.Seq = min(st.Seq, x.Seq)
		raw[i] = x.SeqRaw
		some = some || x.Loaded
	}
	st.Partial = some && !st.Loaded
	st.SeqRaw = strings.Join(raw, ",")
	return st
}

func (s *Stock) shardStates(ctx context.Context, saleID int64, k int) ([]SaleState, error) {
	cmds := make([]*redis.MapStringStringCmd, k)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range k {
			cmds[sh] = p.HGetAll(ctx, MetaKeyOf(saleID, sh))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sale state %d: %w", saleID, err)
	}
	out := make([]SaleState, k)
	for sh, c := range cmds {
		out[sh] = parseMeta(c.Val())
	}
	return out, nil
}

// State reads a sale's meta (every shard's, for a sharded sale).
func (s *Stock) State(ctx context.Context, saleID int64) (SaleState, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return SaleState{}, fmt.Errorf("sale state %d: %w", saleID, err)
	}
	states, err := s.shardStates(ctx, saleID, k)
	if err != nil {
		return SaleState{}, err
	}
	return combine(states), nil
}

// Levels reads the remaining units of a sale's items in one round trip; an item whose key is
// missing gets -1.
func (s *Stock) Levels(ctx context.Context, saleID int64, itemIDs []int64) ([]int64, error) {
	if len(itemIDs) == 0 {
		return nil, nil
	}
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("stock levels: %w", err)
	}
	if k > 1 {
		return s.shardedLevels(ctx, saleID, k, itemIDs)
	}
	cmds := make([]*redis.StringCmd, len(itemIDs))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range itemIDs {
			cmds[i] = p.Get(ctx, StockKey(saleID, id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("stock levels: %w", err)
	}
	out := make([]int64, len(itemIDs))
	for i, c := range cmds {
		v, err := c.Int64()
		switch {
		case errors.Is(err, redis.Nil):
			out[i] = -1
		case err != nil:
			return nil, fmt.Errorf("stock level(item %d): %w", itemIDs[i], err)
		default:
			out[i] = v
		}
	}
	return out, nil
}

// InFlightEntry is one entry of a sale's in-flight register.
type InFlightEntry struct {
	OrderID    string
	ItemID     int64
	UserID     int64
	ReservedAt time.Time // Redis's clock
	Seq        int64
	Claimed    bool // the writer has taken it from the queue
	Shard      int  // the shard whose register holds it (0 for a sale of one shard)
}

// InFlight lists a sale's reservations that Postgres does not hold yet (as far as Redis knows),
// of every shard.
func (s *Stock) InFlight(ctx context.Context, saleID int64) ([]InFlightEntry, error) {
	ms, err := s.hashes(ctx, saleID, InFlightKeyOf)
	if err != nil {
		return nil, fmt.Errorf("in flight(sale %d): %w", saleID, err)
	}
	var out []InFlightEntry
	for sh, m := range ms {
		for id, v := range m {
			e, ok := parseInFlight(id, v)
			if ok {
				e.Shard = sh
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// InFlightOlder lists a sale's reservations in flight (every shard's) reserved more than age
// ago by the clock of the Redis holding them: each shard's register and its node's clock are read
// in one MULTI, since on a Redis Cluster each node has its own clock.
func (s *Stock) InFlightOlder(ctx context.Context, saleID int64, age time.Duration) ([]InFlightEntry, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("in flight(sale %d): %w", saleID, err)
	}
	var out []InFlightEntry
	for sh := range k {
		var flight *redis.MapStringStringCmd
		var tm *redis.TimeCmd
		if _, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			flight = p.HGetAll(ctx, InFlightKeyOf(saleID, sh))
			tm = p.Time(ctx)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("in flight(sale %d, shard %d): %w", saleID, sh, err)
		}
		cutoff := tm.Val().Add(-age)
		for id, v := range flight.Val() {
			if e, ok := parseInFlight(id, v); ok && e.ReservedAt.Before(cutoff) {
				e.Shard = sh
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// hashes reads one hash of every shard of a sale.
func (s *Stock) hashes(ctx context.Context, saleID int64, key func(int64, int) string) ([]map[string]string, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return nil, err
	}
	return s.hashesOf(ctx, saleID, k, key)
}

// hashesOf is hashes for a sale of k shards.
func (s *Stock) hashesOf(ctx context.Context, saleID int64, k int, key func(int64, int) string) ([]map[string]string, error) {
	if k == 1 {
		m, err := s.rdb.HGetAll(ctx, key(saleID, 0)).Result()
		return []map[string]string{m}, err
	}
	cmds := make([]*redis.MapStringStringCmd, k)
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range k {
			cmds[sh] = p.HGetAll(ctx, key(saleID, sh))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]map[string]string, k)
	for sh, c := range cmds {
		out[sh] = c.Val()
	}
	return out, nil
}

// InFlightOrder looks one order up in its sale's in-flight register (every shard's).
func (s *Stock) InFlightOrder(ctx context.Context, saleID int64, orderID string) (InFlightEntry, bool, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return InFlightEntry{}, false, fmt.Errorf("in flight(sale %d, order %s): %w", saleID, orderID, err)
	}
	cmds := make([]*redis.StringCmd, k)
	if k == 1 {
		cmds[0] = s.rdb.HGet(ctx, InFlightKey(saleID), orderID)
	} else {
		_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for sh := range k {
				cmds[sh] = p.HGet(ctx, InFlightKeyOf(saleID, sh), orderID)
			}
			return nil
		})
	}
	for _, c := range cmds {
		v, err := c.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return InFlightEntry{}, false, fmt.Errorf("in flight(sale %d, order %s): %w", saleID, orderID, err)
		}
		e, ok := parseInFlight(orderID, v)
		return e, ok, nil
	}
	return InFlightEntry{}, false, nil
}

func parseInFlight(id, v string) (InFlightEntry, bool) {
	claimed := strings.HasSuffix(v, ":c")
	parts := strings.Split(strings.TrimSuffix(v, ":c"), ":")
	if len(parts) != 4 {
		return InFlightEntry{}, false
	}
	var n [4]int64
	for i, p := range parts {
		x, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return InFlightEntry{}, false
		}
		n[i] = x
	}
	return InFlightEntry{OrderID: id, ItemID: n[0], UserID: n[1], ReservedAt: time.UnixMilli(n[2]), Seq: n[3], Claimed: claimed}, true
}

// Buyers returns a sale's buyers hash (member -> order id).
// A sharded sale's shards' buyers together.
func (s *Stock) Buyers(ctx context.Context, saleID int64) (map[string]string, error) {
	ms, err := s.hashes(ctx, saleID, BuyersKeyOf)
	if err != nil {
		return nil, fmt.Errorf("buyers(sale %d): %w", saleID, err)
	}
	if len(ms) == 1 {
		return ms[0], nil
	}
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out, nil
}

// AreGone reports, for each order id, whether the sale's tombstones name it.
func (s *Stock) AreGone(ctx context.Context, saleID int64, ids []string) ([]bool, error) {
	out := make([]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("gone(sale %d): %w", saleID, err)
	}
	for sh := range k {
		// a unit goes back in its shopper's shard; a tombstone in any shard counts
		res, err := s.rdb.SMIsMember(ctx, GoneKeyOf(saleID, sh), args...).Result()
		if err != nil {
			return nil, fmt.Errorf("gone(sale %d): %w", saleID, err)
		}
		for i, g := range res {
			out[i] = out[i] || g
		}
	}
	return out, nil
}

// Now reads Redis's clock: the one clock every instance agrees on. On a Redis Cluster it is the
// clock of any node: a decision about a sale's reservations reads its own node's (InFlightOlder,
// View).
func (s *Stock) Now(ctx context.Context) (time.Time, error) {
	t, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("redis time: %w", err)
	}
	return t, nil
}

// Client exposes the Redis client (registrations, leases, health).
func (s *Stock) Client() redis.UniversalClient { return s.rdb }

// RedisView is a sale's Redis state read in one MULTI: what the reconciliation compares with
// Postgres.
type RedisView struct {
	State    SaleState
	Levels   map[int64]int64 // item id -> units left (-1 missing)
	Buyers   int64           // members of the buyers hash
	InFlight []InFlightEntry
	Gone     map[string]bool // of the order ids asked about
	Now      time.Time       // Redis's clock at the reading (shard 0's node's, for a sharded sale)
	// ShardNow is each shard's node's clock, read in the shard's MULTI (index: shard). On a Redis
	// Cluster the shards live on different nodes whose clocks differ: a reservation's age is
	// judged by the clock of its own shard (Age).
	ShardNow []time.Time
	// InTransit is, per item of a sharded sale, the units taken from one shard for another and not
	// yet added there (counted in Levels too).
	InTransit map[int64]int64
}

// Age is how long ago e was reserved, by the clock of the node holding e's shard.
func (v RedisView) Age(e InFlightEntry) time.Duration {
	now := v.Now
	if e.Shard >= 0 && e.Shard < len(v.ShardNow) {
		now = v.ShardNow[e.Shard]
	}
	return now.Sub(e.ReservedAt)
}

// View reads a sale's Redis state atomically; gone lists the order ids to look up in the
// tombstones.
//
// A sharded sale is read one MULTI per shard (each shard is its own slot), then its transfer logs:
// the shards are read moments apart, which the reconciliation's quiet-sale rule allows for.
func (s *Stock) View(ctx context.Context, saleID int64, items []int64, gone []string) (RedisView, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return RedisView{}, fmt.Errorf("redis view(sale %d): %w", saleID, err)
	}
	if k == 1 {
		return s.viewShard(ctx, saleID, 0, items, gone)
	}
	// A transfer between shards during the reads could show its units in neither or both: the
	// view is read again (a few times at most) until no transfer started while it was read.
	var v RedisView
	for range 3 {
		before, err := s.transferCounts(ctx, saleID, k)
		if err != nil {
			return RedisView{}, err
		}
		if v, err = s.shardedView(ctx, saleID, k, items, gone); err != nil {
			return RedisView{}, err
		}
		after, err := s.transferCounts(ctx, saleID, k)
		if err != nil {
			return RedisView{}, err
		}
		if after == before {
			break
		}
	}
	return v, nil
}

// shardedView reads every shard of a sale, one MULTI each, then the transfer logs.
func (s *Stock) shardedView(ctx context.Context, saleID int64, k int, items []int64, gone []string) (RedisView, error) {
	v := RedisView{Levels: map[int64]int64{}, Gone: map[string]bool{}, InTransit: map[int64]int64{}}
	states := make([]SaleState, k)
	for sh := range k {
		x, err := s.viewShard(ctx, saleID, sh, items, gone)
		if err != nil {
			return RedisView{}, err
		}
		states[sh] = x.State
		if sh == 0 {
			v.Now = x.Now
		}
		v.ShardNow = append(v.ShardNow, x.Now)
		for it, n := range x.Levels {
			if n >= 0 {
				v.Levels[it] = max(v.Levels[it], 0) + n
			} else if _, ok := v.Levels[it]; !ok {
				v.Levels[it] = -1
			}
		}
		v.Buyers += x.Buyers
		v.InFlight = append(v.InFlight, x.InFlight...)
		for id, g := range x.Gone {
			v.Gone[id] = v.Gone[id] || g
		}
	}
	v.State = combine(states)
	ts, err := s.Transfers(ctx, saleID)
	if err != nil {
		return RedisView{}, err
	}
	for _, t := range ts {
		if !t.Applied && t.Epoch == v.State.Epoch {
			v.InTransit[t.ItemID] += t.N
			if v.Levels[t.ItemID] >= 0 {
				v.Levels[t.ItemID] += t.N
			}
		}
	}
	return v, nil
}

// viewShard reads one shard's state in one MULTI.
func (s *Stock) viewShard(ctx context.Context, saleID int64, sh int, items []int64, gone []string) (RedisView, error) {
	var meta *redis.MapStringStringCmd
	var flight *redis.MapStringStringCmd
	var buyers *redis.IntCmd
	var tm *redis.TimeCmd
	var goneCmd *redis.BoolSliceCmd
	levels := make([]*redis.StringCmd, len(items))
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HGetAll(ctx, MetaKeyOf(saleID, sh))
		for i, it := range items {
			levels[i] = p.Get(ctx, StockKeyOf(saleID, sh, it))
		}
		buyers = p.HLen(ctx, BuyersKeyOf(saleID, sh))
		flight = p.HGetAll(ctx, InFlightKeyOf(saleID, sh))
		tm = p.Time(ctx)
		if len(gone) > 0 {
			args := make([]any, len(gone))
			for i, g := range gone {
				args[i] = g
			}
			goneCmd = p.SMIsMember(ctx, GoneKeyOf(saleID, sh), args...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return RedisView{}, fmt.Errorf("redis view(sale %d): %w", saleID, err)
	}
	v := RedisView{Levels: map[int64]int64{}, Gone: map[string]bool{}, Now: tm.Val(), ShardNow: []time.Time{tm.Val()}, State: parseMeta(meta.Val())}
	for i, it := range items {
		n, err := levels[i].Int64()
		if err != nil {
			n = -1
		}
		v.Levels[it] = n
	}
	v.Buyers = buyers.Val()
	for id, raw := range flight.Val() {
		if e, ok := parseInFlight(id, raw); ok {
			e.Shard = sh
			v.InFlight = append(v.InFlight, e)
		}
	}
	if goneCmd != nil {
		for i, ok := range goneCmd.Val() {
			v.Gone[gone[i]] = ok
		}
	}
	return v, nil
}
