package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/lua"
)

// Refusals the reserve script can answer instead of a reservation.
var (
	ErrSoldOut          = errors.New("sold out")
	ErrAlreadyBuyer     = errors.New("already a buyer")
	ErrStockUnknown     = errors.New("stock not loaded in redis")
	ErrTokenAlreadyUsed = errors.New("purchase token already used")
)

// Stock keeps the hot state of every item in Redis: remaining units, buyers and reservations in
// flight. All keys of one item share the hash tag {item:N}, so each script touches one slot.
type Stock struct {
	rdb     redis.UniversalClient
	reserve *redis.Script
	release *redis.Script
	load    *redis.Script
	claim   *redis.Script
}

// NewStock returns a Stock on rdb; scripts run with EVALSHA and fall back to EVAL on NOSCRIPT.
func NewStock(rdb redis.UniversalClient) *Stock {
	return &Stock{
		rdb:     rdb,
		reserve: redis.NewScript(lua.Reserve),
		release: redis.NewScript(lua.Release),
		load:    redis.NewScript(lua.Load),
		claim:   redis.NewScript(lua.Claim),
	}
}

// OpenRedis connects to the Redis at url (redis://host:port/db) and checks it answers.
func OpenRedis(ctx context.Context, url string, poolSize int) (*redis.Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis url: %w", err)
	}
	if poolSize > 0 {
		opt.PoolSize = poolSize
	}
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

func itemTag(itemID int64) string { return "{item:" + strconv.FormatInt(itemID, 10) + "}" }

// StockKey is the Redis key holding an item's remaining units.
func StockKey(itemID int64) string { return itemTag(itemID) + ":stock" }

// BuyersKey is the Redis set of user ids holding a unit of an item.
func BuyersKey(itemID int64) string { return itemTag(itemID) + ":buyers" }

// InFlightKey is the Redis hash of an item's reservations not yet written to Postgres.
func InFlightKey(itemID int64) string { return itemTag(itemID) + ":inflight" }

func tokenKey(itemID int64, nonce string) string { return itemTag(itemID) + ":tok:" + nonce }

// Reserve runs the reserve script: it consumes the purchase token (nonce) and, if the user is not
// yet a buyer and a unit is left, takes the unit and registers orderID in flight. It returns the
// units left, or one of ErrSoldOut, ErrAlreadyBuyer, ErrStockUnknown, ErrTokenAlreadyUsed.
func (s *Stock) Reserve(ctx context.Context, itemID, userID int64, orderID, nonce string, tokenTTL time.Duration, now time.Time) (int64, error) {
	keys := []string{StockKey(itemID), BuyersKey(itemID), InFlightKey(itemID), tokenKey(itemID, nonce)}
	n, err := s.reserve.Run(ctx, s.rdb, keys, userID, orderID, tokenTTL.Milliseconds(), now.UnixMilli()).Int64()
	if err != nil {
		return 0, fmt.Errorf("reserve(item %d): %w", itemID, err)
	}
	switch n {
	case -1:
		return 0, ErrSoldOut
	case -2:
		return 0, ErrAlreadyBuyer
	case -3:
		return 0, ErrStockUnknown
	case -4:
		return 0, ErrTokenAlreadyUsed
	}
	return n, nil
}

// ReleaseOutcome tells what a release did.
type ReleaseOutcome int

// The outcomes of Release.
const (
	// NotInFlight: nothing to release (already released or already written).
	NotInFlight ReleaseOutcome = iota
	// Released: the reservation was given back now.
	Released
	// Claimed: the writer holds the order from the queue; it will be written, not released.
	Claimed
)

// Release gives back the reservation orderID: removes it from flight, frees the buyer and, if
// restock, returns the unit to stock. A reservation the writer has claimed is left alone unless
// force (the writer's own release of an order Postgres refused). Idempotent.
func (s *Stock) Release(ctx context.Context, itemID int64, orderID string, restock, force bool) (ReleaseOutcome, error) {
	return s.release3(ctx, itemID, orderID, restock, force, false)
}

// ReleaseKeepBuyer is Release for an order refused because its shopper already holds a live
// order of the item: the shopper stays a buyer.
func (s *Stock) ReleaseKeepBuyer(ctx context.Context, itemID int64, orderID string) (ReleaseOutcome, error) {
	return s.release3(ctx, itemID, orderID, true, true, true)
}

func (s *Stock) release3(ctx context.Context, itemID int64, orderID string, restock, force, keepBuyer bool) (ReleaseOutcome, error) {
	flag, mode, buyer := "0", "", ""
	if restock {
		flag = "1"
	}
	if force {
		mode = "force"
	}
	if keepBuyer {
		buyer = "keepbuyer"
	}
	keys := []string{StockKey(itemID), BuyersKey(itemID), InFlightKey(itemID)}
	n, err := s.release.Run(ctx, s.rdb, keys, orderID, flag, mode, buyer).Int64()
	if err != nil {
		return NotInFlight, fmt.Errorf("release(item %d, order %s): %w", itemID, orderID, err)
	}
	return ReleaseOutcome(n), nil
}

// Claim marks orders of one item as being written by the writer. It returns, for each order,
// whether to write it: false means the reservation was released (its publish was reported as
// failed), so the message must be skipped. With the item unknown to Redis every order is written.
func (s *Stock) Claim(ctx context.Context, itemID int64, orderIDs []string) ([]bool, error) {
	args := make([]any, len(orderIDs))
	for i, id := range orderIDs {
		args[i] = id
	}
	res, err := s.claim.Run(ctx, s.rdb, []string{StockKey(itemID), InFlightKey(itemID)}, args...).Int64Slice()
	if err != nil {
		return nil, fmt.Errorf("claim(item %d): %w", itemID, err)
	}
	out := make([]bool, len(res))
	for i, v := range res {
		out[i] = v == 1
	}
	return out, nil
}

// Settle removes orders that Postgres now holds from the in-flight registers, in one round trip.
func (s *Stock) Settle(ctx context.Context, byItem map[int64][]string) error {
	if len(byItem) == 0 {
		return nil
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for item, ids := range byItem {
			if len(ids) > 0 {
				p.HDel(ctx, InFlightKey(item), ids...)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

// Load warms an item's keys if they are missing: left units and the buyers holding live orders.
// It reports whether it loaded them now.
func (s *Stock) Load(ctx context.Context, itemID int64, left int64, buyers []int64) (bool, error) {
	args := make([]any, 0, len(buyers)+1)
	args = append(args, left)
	for _, b := range buyers {
		args = append(args, b)
	}
	keys := []string{StockKey(itemID), BuyersKey(itemID), InFlightKey(itemID)}
	n, err := s.load.Run(ctx, s.rdb, keys, args...).Int64()
	if err != nil {
		return false, fmt.Errorf("load(item %d): %w", itemID, err)
	}
	return n == 1, nil
}

// Levels reads the remaining units of several items in one round trip; an item whose key is
// missing gets -1.
func (s *Stock) Levels(ctx context.Context, itemIDs []int64) ([]int64, error) {
	if len(itemIDs) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.StringCmd, len(itemIDs))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range itemIDs {
			cmds[i] = p.Get(ctx, StockKey(id))
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

// Reservation is one entry of an item's in-flight register.
type Reservation struct {
	OrderID    string
	UserID     int64
	ReservedAt time.Time
	Claimed    bool // the writer has taken it from the queue
}

// InFlight lists an item's reservations that Postgres does not hold yet (as far as Redis knows).
func (s *Stock) InFlight(ctx context.Context, itemID int64) ([]Reservation, error) {
	m, err := s.rdb.HGetAll(ctx, InFlightKey(itemID)).Result()
	if err != nil {
		return nil, fmt.Errorf("in flight(item %d): %w", itemID, err)
	}
	out := make([]Reservation, 0, len(m))
	for id, v := range m {
		user, at, ok := parseInFlight(v)
		if !ok {
			continue
		}
		out = append(out, Reservation{OrderID: id, UserID: user, ReservedAt: at, Claimed: strings.HasSuffix(v, ":c")})
	}
	return out, nil
}

// InFlightOrder looks one order up in its item's in-flight register.
func (s *Stock) InFlightOrder(ctx context.Context, itemID int64, orderID string) (Reservation, bool, error) {
	v, err := s.rdb.HGet(ctx, InFlightKey(itemID), orderID).Result()
	if errors.Is(err, redis.Nil) {
		return Reservation{}, false, nil
	}
	if err != nil {
		return Reservation{}, false, fmt.Errorf("in flight(item %d, order %s): %w", itemID, orderID, err)
	}
	user, at, ok := parseInFlight(v)
	if !ok {
		return Reservation{}, false, nil
	}
	return Reservation{OrderID: orderID, UserID: user, ReservedAt: at}, true, nil
}

func parseInFlight(v string) (int64, time.Time, bool) {
	v = strings.TrimSuffix(v, ":c")
	u, ms, ok := strings.Cut(v, ":")
	if !ok {
		return 0, time.Time{}, false
	}
	user, err1 := strconv.ParseInt(u, 10, 64)
	at, err2 := strconv.ParseInt(ms, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, time.Time{}, false
	}
	return user, time.UnixMilli(at), true
}

// IsBuyer reports whether Redis counts userID among an item's buyers.
func (s *Stock) IsBuyer(ctx context.Context, itemID, userID int64) (bool, error) {
	ok, err := s.rdb.SIsMember(ctx, BuyersKey(itemID), userID).Result()
	if err != nil {
		return false, fmt.Errorf("is buyer(item %d): %w", itemID, err)
	}
	return ok, nil
}
