package store_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newStock starts a real redis-server for the test and returns a Stock and a raw client on it.
func newStock(t testing.TB) (*store.Stock, redis.UniversalClient) {
	t.Helper()
	s, rdb, _ := newStockServer(t)
	return s, rdb
}

// newStockServer is newStock that also hands back the server, to crash or restore it.
func newStockServer(t testing.TB) (*store.Stock, redis.UniversalClient, *testenv.RedisServer) {
	t.Helper()
	return newStockOf(t, store.OneShard)
}

// newStockOf is newStockServer whose sales have the shards counts tells.
func newStockOf(t testing.TB, shards store.ShardCounter) (*store.Stock, redis.UniversalClient, *testenv.RedisServer) {
	t.Helper()
	rs := testenv.Redis(t)
	rdb, err := store.OpenRedis(context.Background(), rs.URL(), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return store.NewStock(rdb, shards), rdb, rs
}

// kShards is the ShardCounter of sales that all have k stock shards.
func kShards(k int) store.ShardCounter {
	return func(context.Context, int64) (int, error) { return k, nil }
}

// tokenKey is the used-token marker the reserve script sets (KEYS[5] in reserve.lua).
func tokenKey(sale int64, nonce string) string {
	return "{sale:" + strconv.FormatInt(sale, 10) + "}:tok:" + nonce
}

// redisNow reads Redis's clock, the one the scripts judge tokens and the sale window by.
func redisNow(t testing.TB, s *store.Stock) time.Time {
	t.Helper()
	now, err := s.Now(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// snapshot is a sale open from an hour ago to an hour from now (Redis's clock), epoch 1, with the
// items in the order given: item, left, item, left...
func snapshot(t testing.TB, s *store.Stock, sale int64, limit string, itemLeft ...int64) store.Snapshot {
	t.Helper()
	now := redisNow(t, s)
	snap := store.Snapshot{
		SaleID:   sale,
		Epoch:    1,
		Limit:    limit,
		StartsAt: now.Add(-time.Hour),
		EndsAt:   now.Add(time.Hour),
		Left:     map[int64]int64{},
		Buyers:   map[string]string{},
	}
	for i := 0; i+1 < len(itemLeft); i += 2 {
		snap.Items = append(snap.Items, itemLeft[i])
		snap.Left[itemLeft[i]] = itemLeft[i+1]
	}
	return snap
}

func mustLoad(t testing.TB, s *store.Stock, snap store.Snapshot, void time.Duration) {
	t.Helper()
	ok, err := s.Load(context.Background(), snap, void)
	if err != nil || !ok {
		t.Fatalf("load(sale %d, epoch %d) = %v, %v; want loaded", snap.SaleID, snap.Epoch, ok, err)
	}
}

// attempt is a purchase attempt whose token expires a minute from now (Redis's clock).
func attempt(t testing.TB, s *store.Stock, sale, item, user int64, order, nonce string) store.Attempt {
	t.Helper()
	return store.Attempt{SaleID: sale, ItemID: item, UserID: user, OrderID: order, Nonce: nonce, TokenExpires: redisNow(t, s).Add(time.Minute)}
}

func mustReserve(t testing.TB, s *store.Stock, a store.Attempt) store.Reservation {
	t.Helper()
	r, err := s.Reserve(context.Background(), a)
	if err != nil {
		t.Fatalf("reserve(sale %d, item %d, user %d, order %s) = %+v, %v; want a reservation", a.SaleID, a.ItemID, a.UserID, a.OrderID, r, err)
	}
	return r
}

func stockOf(t *testing.T, rdb redis.UniversalClient, sale, item int64) int64 {
	t.Helper()
	n, err := rdb.Get(context.Background(), store.StockKey(sale, item)).Int64()
	if err != nil {
		t.Fatalf("stock of sale %d item %d: %v", sale, item, err)
	}
	return n
}

func stateOf(t *testing.T, s *store.Stock, sale int64) store.SaleState {
	t.Helper()
	st, err := s.State(context.Background(), sale)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func buyersOf(t *testing.T, s *store.Stock, sale int64) map[string]string {
	t.Helper()
	m, err := s.Buyers(context.Background(), sale)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func inFlightRaw(t *testing.T, rdb redis.UniversalClient, sale int64) map[string]string {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), store.InFlightKey(sale)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func isGone(t *testing.T, s *store.Stock, sale int64, order string) bool {
	t.Helper()
	g, err := s.AreGone(context.Background(), sale, []string{order})
	if err != nil {
		t.Fatal(err)
	}
	return g[0]
}

func exists(t *testing.T, rdb redis.UniversalClient, key string) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func allKeys(t *testing.T, rdb redis.UniversalClient) []string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

func metaField(t *testing.T, rdb redis.UniversalClient, sale int64, field string) string {
	t.Helper()
	v, err := rdb.HGet(context.Background(), store.MetaKey(sale), field).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return v
}

func release(t *testing.T, s *store.Stock, o shop.OrderRef, op shop.ReleaseOp) store.ReleaseOutcome {
	t.Helper()
	out, err := s.Release(context.Background(), o, op)
	if err != nil {
		t.Fatalf("release %s of %s: %v", op, o.OrderID, err)
	}
	return out
}

func claim(t testing.TB, s *store.Stock, sale int64, orders ...store.ClaimItem) []int {
	t.Helper()
	got, err := s.Claim(context.Background(), sale, orders)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The scripts run by EVALSHA; after SCRIPT FLUSH (a restarted or failed-over Redis) they must
// fall back to EVAL and keep working.
func TestScriptsSurviveScriptFlush(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 63, 630
	flush := func() {
		t.Helper()
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	snap := snapshot(t, s, sale, shop.LimitPerSale, item, 3)
	flush()
	mustLoad(t, s, snap, 0)
	flush()
	r := mustReserve(t, s, attempt(t, s, sale, item, 1, "o1", "n1"))
	flush()
	if got := claim(t, s, sale, store.ClaimItem{OrderID: "o1", Seq: r.Seq}); !slices.Equal(got, []int{1}) {
		t.Errorf("claim after SCRIPT FLUSH = %v", got)
	}
	flush()
	if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 1, OrderID: "o1"}, shop.ReleaseRefused); out != store.Released {
		t.Errorf("release after SCRIPT FLUSH = %v", out)
	}
	flush()
	if ok, err := s.MarkLost(ctx, sale, 0, ""); !ok || err != nil {
		t.Errorf("mark lost after SCRIPT FLUSH = %v, %v", ok, err)
	}
	if got := stockOf(t, rdb, sale, item); got != 3 {
		t.Errorf("stock = %d, want 3", got)
	}
}

// Every key a script touches for one sale hashes to one cluster slot, so the scripts run on
// Redis Cluster; and every key the scripts create carries the sale's tag.
func TestKeysShareOneSlot(t *testing.T) {
	t.Parallel()
	if got, want := testenv.KeySlot("123456789"), 0x31C3%16384; got != want {
		t.Fatalf("slot of the crc16 check value = %d, want %d", got, want) // from the Redis Cluster spec
	}
	if got, want := testenv.KeySlot("{user1000}.following"), testenv.KeySlot("user1000"); got != want {
		t.Fatalf("hash tag slot = %d, want %d", got, want)
	}
	keyNamesShareTheSalesSlot(t)

	// Every key the scripts create lies in the sale's slot.
	s, rdb := newStock(t)
	for _, sale := range []int64{70, 71} {
		runEveryScript(t, s, sale)
	}
	keys := allKeys(t, rdb)
	want := []string{
		"{sale:70}:buyers", "{sale:70}:gone", "{sale:70}:meta", "{sale:70}:stock:1", "{sale:70}:stock:2",
		"{sale:70}:tok:n1", "{sale:70}:tok:n2", "{sale:70}:tok:n3",
		"{sale:71}:buyers", "{sale:71}:gone", "{sale:71}:meta", "{sale:71}:stock:1", "{sale:71}:stock:2",
		"{sale:71}:tok:n1", "{sale:71}:tok:n2", "{sale:71}:tok:n3",
	}
	if !slices.Equal(keys, want) {
		t.Errorf("keys = %v, want %v", keys, want)
	}
	for _, k := range keys {
		sale := k[len("{sale:"):strings.IndexByte(k, '}')]
		if got, want := testenv.KeySlot(k), testenv.KeySlot("sale:"+sale); got != want {
			t.Errorf("script created %q in slot %d, want the sale's slot %d", k, got, want)
		}
	}
}

// keyNamesShareTheSalesSlot: every key name of a sale carries its tag and hashes to its slot,
// and the sales spread over slots.
func keyNamesShareTheSalesSlot(t *testing.T) {
	t.Helper()
	slots := map[int]bool{}
	for _, sale := range []int64{1, 7, 42, 1000, 65535, 4294967295} {
		tag := "{sale:" + strconv.FormatInt(sale, 10) + "}"
		want := testenv.KeySlot("sale:" + strconv.FormatInt(sale, 10))
		keys := []string{store.MetaKey(sale), store.BuyersKey(sale), store.InFlightKey(sale), store.GoneKey(sale), tokenKey(sale, "0123456789abcdef")}
		for _, item := range []int64{1, 99, 123456789} {
			keys = append(keys, store.StockKey(sale, item))
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, tag) {
				t.Errorf("key %q lacks the hash tag %s", k, tag)
			}
			if got := testenv.KeySlot(k); got != want {
				t.Errorf("key %q in slot %d, want %d", k, got, want)
			}
		}
		slots[want] = true
	}
	if len(slots) < 2 {
		t.Errorf("every sale hashes to the same slot %v: the tag does not spread sales", slots)
	}
}

// runEveryScript loads a sale (items 1 and 2), reserves, is refused, claims, releases, marks it
// lost and rebuilds it.
func runEveryScript(t *testing.T, s *store.Stock, sale int64) {
	t.Helper()
	ctx := context.Background()
	snap := snapshot(t, s, sale, shop.LimitPerItem, 1, 5, 2, 5)
	snap.Buyers = map[string]string{"1:9": "p9"}
	snap.Gone = []string{"g"}
	mustLoad(t, s, snap, 0)
	r := mustReserve(t, s, attempt(t, s, sale, 1, 1, "o1", "n1"))
	mustReserve(t, s, attempt(t, s, sale, 2, 2, "o2", "n2"))
	if _, err := s.Reserve(ctx, attempt(t, s, sale, 1, 9, "o3", "n3")); !errors.Is(err, store.ErrAlreadyBuyer) {
		t.Fatal(err)
	}
	claim(t, s, sale, store.ClaimItem{OrderID: "o1", Seq: r.Seq})
	release(t, s, shop.OrderRef{SaleID: sale, ItemID: 2, UserID: 2, OrderID: "o2"}, shop.ReleaseUnsold)
	release(t, s, shop.OrderRef{SaleID: sale, ItemID: 1, UserID: 9, OrderID: "p9"}, shop.ReturnUnit)
	if ok, err := s.MarkLost(ctx, sale, 1, ""); !ok || err != nil {
		t.Fatal(ok, err)
	}
	snap.Epoch = 2
	mustLoad(t, s, snap, time.Minute)
}
