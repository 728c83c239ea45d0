package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newStock starts a real redis-server for the test and returns a Stock and a raw client on it.
func newStock(t *testing.T) (*store.Stock, *redis.Client) {
	t.Helper()
	rs := testenv.Redis(t)
	rdb, err := store.OpenRedis(context.Background(), rs.URL(), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return store.NewStock(rdb), rdb
}

// tokenKey is the used-token marker the reserve script sets (KEYS[4] in reserve.lua).
func tokenKey(item int64, nonce string) string {
	return "{item:" + strconv.FormatInt(item, 10) + "}:tok:" + nonce
}

func load(t *testing.T, s *store.Stock, item, left int64, buyers ...int64) {
	t.Helper()
	ok, err := s.Load(context.Background(), item, left, buyers)
	if err != nil || !ok {
		t.Fatalf("load(item %d): loaded %v, err %v; want loaded", item, ok, err)
	}
}

func stockOf(t *testing.T, rdb *redis.Client, item int64) int64 {
	t.Helper()
	n, err := rdb.Get(context.Background(), store.StockKey(item)).Int64()
	if err != nil {
		t.Fatalf("stock of item %d: %v", item, err)
	}
	return n
}

func exists(t *testing.T, rdb *redis.Client, key string) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func isBuyer(t *testing.T, s *store.Stock, item, user int64) bool {
	t.Helper()
	ok, err := s.IsBuyer(context.Background(), item, user)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func inFlight(t *testing.T, rdb *redis.Client, item int64) map[string]string {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), store.InFlightKey(item)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestReserve(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const item = 7
	load(t, s, item, 2)
	now := time.UnixMilli(1_800_000_000_123)

	left, err := s.Reserve(ctx, item, 11, "order-a", "nonce-a", 30*time.Second, now)
	if err != nil || left != 1 {
		t.Fatalf("first reserve = %d, %v; want 1 left", left, err)
	}
	if got := stockOf(t, rdb, item); got != 1 {
		t.Errorf("stock = %d, want 1", got)
	}
	if !isBuyer(t, s, item, 11) {
		t.Errorf("user 11 is not a buyer after reserving")
	}
	if got, want := inFlight(t, rdb, item), map[string]string{"order-a": "11:1800000000123"}; !maps.Equal(got, want) {
		t.Errorf("in flight = %v, want %v", got, want)
	}
	pttl, err := rdb.PTTL(ctx, tokenKey(item, "nonce-a")).Result()
	if err != nil || pttl <= 29*time.Second || pttl > 30*time.Second {
		t.Errorf("token marker ttl = %v (%v), want about 30s", pttl, err)
	}
	r, ok, err := s.InFlightOrder(ctx, item, "order-a")
	if err != nil || !ok || r.UserID != 11 || !r.ReservedAt.Equal(now) || r.Claimed {
		t.Errorf("InFlightOrder = %+v, %v, %v; want user 11 at %v, unclaimed", r, ok, err, now)
	}

	// Refusals change nothing but, once the token is checked, consume it.
	refusals := []struct {
		name  string
		user  int64
		nonce string
		want  error
	}{
		{"token used (same nonce, another user)", 12, "nonce-a", store.ErrTokenAlreadyUsed},
		{"already a buyer", 11, "nonce-b", store.ErrAlreadyBuyer},
		{"token used after an already-buyer refusal", 13, "nonce-b", store.ErrTokenAlreadyUsed},
	}
	for _, c := range refusals {
		left, err := s.Reserve(ctx, item, c.user, "order-"+c.name, c.nonce, time.Minute, now)
		if !errors.Is(err, c.want) || left != 0 {
			t.Errorf("%s: reserve = %d, %v; want %v", c.name, left, err, c.want)
		}
	}
	if got := stockOf(t, rdb, item); got != 1 {
		t.Errorf("stock after refusals = %d, want 1", got)
	}
	if got := len(inFlight(t, rdb, item)); got != 1 {
		t.Errorf("in flight after refusals = %d entries, want 1", got)
	}

	// The last unit, then sold out: stock never goes below zero.
	if left, err := s.Reserve(ctx, item, 12, "order-b", "nonce-c", time.Minute, now); err != nil || left != 0 {
		t.Fatalf("last unit: %d, %v; want 0 left", left, err)
	}
	for i := range 3 {
		left, err := s.Reserve(ctx, item, int64(20+i), fmt.Sprintf("order-x%d", i), fmt.Sprintf("nonce-x%d", i), time.Minute, now)
		if !errors.Is(err, store.ErrSoldOut) || left != 0 {
			t.Errorf("sold out: reserve = %d, %v; want ErrSoldOut", left, err)
		}
	}
	if got := stockOf(t, rdb, item); got != 0 {
		t.Errorf("stock after sold out = %d, want 0", got)
	}
	if isBuyer(t, s, item, 20) {
		t.Errorf("a refused shopper became a buyer")
	}
	if got := len(inFlight(t, rdb, item)); got != 2 {
		t.Errorf("in flight = %d entries, want 2", got)
	}

	// An item Redis does not know fails closed and creates nothing.
	const unknown = 8
	if _, err := s.Reserve(ctx, unknown, 11, "order-u", "nonce-u", time.Minute, now); !errors.Is(err, store.ErrStockUnknown) {
		t.Errorf("unknown item: %v, want ErrStockUnknown", err)
	}
	for _, k := range []string{store.StockKey(unknown), store.BuyersKey(unknown), store.InFlightKey(unknown), tokenKey(unknown, "nonce-u")} {
		if exists(t, rdb, k) {
			t.Errorf("a refused reserve on an unknown item created %s", k)
		}
	}
	// The token was not consumed by the fail-closed refusal: it works once the item is loaded.
	load(t, s, unknown, 1)
	if _, err := s.Reserve(ctx, unknown, 11, "order-u", "nonce-u", time.Minute, now); err != nil {
		t.Errorf("after warm-up: %v", err)
	}
}

// Many shoppers at once against few units: exactly the units are sold, each once.
func TestReserveConcurrent(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const item, units, shoppers = 9, 50, 400
	load(t, s, item, units)
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for i := range shoppers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Reserve(ctx, item, int64(1000+i%(shoppers/2)), fmt.Sprintf("o%d", i), fmt.Sprintf("n%d", i), time.Minute, time.Now())
			k := "ok"
			if err != nil {
				k = err.Error()
			}
			mu.Lock()
			outcomes[k]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if outcomes["ok"] != units {
		t.Errorf("reservations = %d, want %d (outcomes %v)", outcomes["ok"], units, outcomes)
	}
	if got := stockOf(t, rdb, item); got != 0 {
		t.Errorf("stock = %d, want 0", got)
	}
	flight := inFlight(t, rdb, item)
	buyers, err := rdb.SMembers(ctx, store.BuyersKey(item)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(flight) != units || len(buyers) != units {
		t.Errorf("in flight %d, buyers %d; want %d each", len(flight), len(buyers), units)
	}
	users := map[string]bool{}
	for _, v := range flight {
		u, _, _ := strings.Cut(v, ":")
		if users[u] {
			t.Errorf("user %s holds two reservations", u)
		}
		users[u] = true
	}
}

func TestRelease(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const item = 21
	load(t, s, item, 3)
	now := time.Now()
	for i, o := range []string{"o1", "o2", "o3"} {
		if _, err := s.Reserve(ctx, item, int64(100+i), o, "n"+o, time.Minute, now); err != nil {
			t.Fatal(err)
		}
	}

	// Restock: the unit and the buyer come back, once.
	out, err := s.Release(ctx, item, "o1", true, false)
	if err != nil || out != store.Released {
		t.Fatalf("release o1 = %v, %v; want Released", out, err)
	}
	if got := stockOf(t, rdb, item); got != 1 {
		t.Errorf("stock after release = %d, want 1", got)
	}
	if isBuyer(t, s, item, 100) {
		t.Errorf("user 100 still a buyer after release")
	}
	if _, ok := inFlight(t, rdb, item)["o1"]; ok {
		t.Errorf("o1 still in flight after release")
	}
	out, err = s.Release(ctx, item, "o1", true, false)
	if err != nil || out != store.NotInFlight {
		t.Errorf("second release o1 = %v, %v; want NotInFlight", out, err)
	}
	if got := stockOf(t, rdb, item); got != 1 {
		t.Errorf("stock after the second release = %d, want 1 (released twice)", got)
	}

	// Without restock (Postgres has no room for it): the buyer is freed, the stock stays.
	if out, err := s.Release(ctx, item, "o2", false, false); err != nil || out != store.Released {
		t.Fatalf("release o2 without restock = %v, %v; want Released", out, err)
	}
	if got := stockOf(t, rdb, item); got != 1 {
		t.Errorf("stock after release without restock = %d, want 1", got)
	}
	if isBuyer(t, s, item, 101) {
		t.Errorf("user 101 still a buyer after release")
	}

	// A claimed reservation belongs to the writer: released only by force.
	if claimed, err := s.Claim(ctx, item, []string{"o3"}); err != nil || !slices.Equal(claimed, []bool{true}) {
		t.Fatalf("claim o3 = %v, %v", claimed, err)
	}
	if out, err := s.Release(ctx, item, "o3", true, false); err != nil || out != store.Claimed {
		t.Errorf("release of a claimed order = %v, %v; want Claimed", out, err)
	}
	if got := stockOf(t, rdb, item); got != 1 {
		t.Errorf("stock after refusing to release a claimed order = %d, want 1", got)
	}
	if !isBuyer(t, s, item, 102) {
		t.Errorf("the claimed order's buyer was freed")
	}
	if out, err := s.Release(ctx, item, "o3", true, true); err != nil || out != store.Released {
		t.Errorf("forced release of a claimed order = %v, %v; want Released", out, err)
	}
	if got := stockOf(t, rdb, item); got != 2 {
		t.Errorf("stock after the forced release = %d, want 2", got)
	}
	if out, err := s.Release(ctx, item, "o3", true, true); err != nil || out != store.NotInFlight {
		t.Errorf("forced release again = %v, %v; want NotInFlight", out, err)
	}
	if n := len(inFlight(t, rdb, item)); n != 0 {
		t.Errorf("in flight = %d entries, want 0", n)
	}

	// Redis lost the stock key: a release must not invent one (it would reopen selling at 1).
	const lost = 22
	load(t, s, lost, 1)
	if _, err := s.Reserve(ctx, lost, 5, "ol", "nl", time.Minute, now); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, store.StockKey(lost)).Err(); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Release(ctx, lost, "ol", true, false); err != nil || out != store.Released {
		t.Errorf("release with the stock key missing = %v, %v; want Released", out, err)
	}
	if exists(t, rdb, store.StockKey(lost)) {
		t.Errorf("release created the missing stock key")
	}
	// Releasing what was never reserved changes nothing.
	if out, err := s.Release(ctx, 23, "never", true, true); err != nil || out != store.NotInFlight {
		t.Errorf("release of an unknown order = %v, %v; want NotInFlight", out, err)
	}
	if exists(t, rdb, store.StockKey(23)) {
		t.Errorf("release of an unknown order created a stock key")
	}
}

func TestClaim(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const item = 31
	load(t, s, item, 5)
	now := time.UnixMilli(1_800_000_000_000)
	for i, o := range []string{"a", "b", "c"} {
		if _, err := s.Reserve(ctx, item, int64(i+1), o, "n"+o, time.Minute, now); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := s.Release(ctx, item, "b", true, false); err != nil || out != store.Released {
		t.Fatalf("release b = %v, %v", out, err)
	}
	got, err := s.Claim(ctx, item, []string{"a", "b", "never", "c"})
	if want := []bool{true, false, false, true}; err != nil || !slices.Equal(got, want) {
		t.Errorf("claim = %v, %v; want %v", got, err, want)
	}
	flight := inFlight(t, rdb, item)
	if want := map[string]string{"a": "1:1800000000000:c", "c": "3:1800000000000:c"}; !maps.Equal(flight, want) {
		t.Errorf("in flight after claim = %v, want %v", flight, want)
	}
	// Claiming twice is harmless and does not stack the mark.
	if got, err := s.Claim(ctx, item, []string{"a"}); err != nil || !slices.Equal(got, []bool{true}) {
		t.Errorf("second claim = %v, %v", got, err)
	}
	if v := inFlight(t, rdb, item)["a"]; v != "1:1800000000000:c" {
		t.Errorf("in flight value after a second claim = %q", v)
	}
	list, err := s.InFlight(ctx, item)
	if err != nil || len(list) != 2 {
		t.Fatalf("InFlight = %v, %v", list, err)
	}
	for _, r := range list {
		if !r.Claimed || !r.ReservedAt.Equal(now) {
			t.Errorf("InFlight entry %+v: want claimed, reserved at %v", r, now)
		}
	}
	// A claimed order still answers the status poll as queued.
	if r, ok, err := s.InFlightOrder(ctx, item, "c"); err != nil || !ok || r.UserID != 3 {
		t.Errorf("InFlightOrder(claimed) = %+v, %v, %v", r, ok, err)
	}
	if got, err := s.Claim(ctx, item, nil); err != nil || len(got) != 0 {
		t.Errorf("claim of nothing = %v, %v", got, err)
	}

	// Once Postgres holds them, the writer settles them out of flight.
	if err := s.Settle(ctx, map[int64][]string{item: {"a", "c"}, 33: nil}); err != nil {
		t.Fatal(err)
	}
	if n := len(inFlight(t, rdb, item)); n != 0 {
		t.Errorf("in flight after settle = %d entries, want 0", n)
	}
	if got := stockOf(t, rdb, item); got != 3 {
		t.Errorf("stock after settle = %d, want 3 (settling sells, it does not restock)", got)
	}

	// Redis lost its data: every order counts as claimed, and nothing is written.
	const lost = 32
	got, err = s.Claim(ctx, lost, []string{"x", "y"})
	if want := []bool{true, true}; err != nil || !slices.Equal(got, want) {
		t.Errorf("claim with the stock key missing = %v, %v; want %v", got, err, want)
	}
	if exists(t, rdb, store.InFlightKey(lost)) || exists(t, rdb, store.StockKey(lost)) {
		t.Errorf("claim on an unknown item created keys")
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()

	const item = 41
	// Leftovers of a lost stock key are replaced, not merged.
	if err := rdb.SAdd(ctx, store.BuyersKey(item), 999).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, store.InFlightKey(item), "stale", "999:1").Err(); err != nil {
		t.Fatal(err)
	}
	load(t, s, item, 7, 1, 2, 3)
	if got := stockOf(t, rdb, item); got != 7 {
		t.Errorf("stock = %d, want 7", got)
	}
	buyers, _ := rdb.SMembers(ctx, store.BuyersKey(item)).Result()
	slices.Sort(buyers)
	if want := []string{"1", "2", "3"}; !slices.Equal(buyers, want) {
		t.Errorf("buyers = %v, want %v", buyers, want)
	}
	if exists(t, rdb, store.InFlightKey(item)) {
		t.Errorf("stale in-flight entries survived the load")
	}

	// Only when missing: a second load (another instance, stale figures) changes nothing.
	loaded, err := s.Load(ctx, item, 100, []int64{50})
	if err != nil || loaded {
		t.Errorf("second load = %v, %v; want not loaded", loaded, err)
	}
	if got := stockOf(t, rdb, item); got != 7 {
		t.Errorf("stock after the second load = %d, want 7", got)
	}
	if isBuyer(t, s, item, 50) {
		t.Errorf("the second load added a buyer")
	}
	// Zero units left is a known, sold-out item, not a missing one.
	load(t, s, 42, 0)
	if _, err := s.Reserve(ctx, 42, 1, "o", "n", time.Minute, time.Now()); !errors.Is(err, store.ErrSoldOut) {
		t.Errorf("reserve on a zero-loaded item: %v, want ErrSoldOut", err)
	}

	// Large buyer lists go in chunks (Lua's unpack has a limit); every buyer must land.
	for i, n := range []int{4999, 5000, 5001, 10000, 12345} {
		item := int64(100 + i)
		buyers := make([]int64, n)
		for j := range buyers {
			buyers[j] = int64(j + 1)
		}
		load(t, s, item, 3, buyers...)
		if got, err := rdb.SCard(ctx, store.BuyersKey(item)).Result(); err != nil || got != int64(n) {
			t.Errorf("%d buyers loaded as %d (%v)", n, got, err)
		}
		for _, u := range []int64{1, 4999, 5000, 5001, int64(n)} {
			if u <= int64(n) && !isBuyer(t, s, item, u) {
				t.Errorf("%d buyers: user %d missing", n, u)
			}
		}
		if _, err := s.Reserve(ctx, item, int64(n), "o", "n", time.Minute, time.Now()); !errors.Is(err, store.ErrAlreadyBuyer) {
			t.Errorf("%d buyers: the last buyer reserves again: %v, want ErrAlreadyBuyer", n, err)
		}
	}

	levels, err := s.Levels(ctx, []int64{item, 42, 4343})
	if want := []int64{7, 0, -1}; err != nil || !slices.Equal(levels, want) {
		t.Errorf("levels = %v, %v; want %v", levels, err, want)
	}
}

// The scripts run by EVALSHA; after SCRIPT FLUSH (a restarted or failed-over Redis) they must
// fall back to EVAL and keep working.
func TestScriptsSurviveScriptFlush(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const item = 51
	load(t, s, item, 3)
	if _, err := s.Reserve(ctx, item, 1, "o1", "n1", time.Minute, time.Now()); err != nil {
		t.Fatal(err)
	}
	flush := func() {
		t.Helper()
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	if left, err := s.Reserve(ctx, item, 2, "o2", "n2", time.Minute, time.Now()); err != nil || left != 1 {
		t.Errorf("reserve after SCRIPT FLUSH = %d, %v; want 1 left", left, err)
	}
	flush()
	if got, err := s.Claim(ctx, item, []string{"o2"}); err != nil || !slices.Equal(got, []bool{true}) {
		t.Errorf("claim after SCRIPT FLUSH = %v, %v", got, err)
	}
	flush()
	if out, err := s.Release(ctx, item, "o1", true, false); err != nil || out != store.Released {
		t.Errorf("release after SCRIPT FLUSH = %v, %v", out, err)
	}
	flush()
	if ok, err := s.Load(ctx, 52, 4, nil); err != nil || !ok {
		t.Errorf("load after SCRIPT FLUSH = %v, %v", ok, err)
	}
	if got := stockOf(t, rdb, item); got != 2 {
		t.Errorf("stock = %d, want 2", got)
	}
}

// crc16 is the CRC16-CCITT (XModem) that Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// keySlot is Redis Cluster's slot of a key, honouring a {hash tag}.
func keySlot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % 16384
}

// Every key a script touches for one item hashes to one cluster slot, so the scripts run on
// Redis Cluster; and every key the scripts create carries the tag.
func TestKeysShareOneSlot(t *testing.T) {
	t.Parallel()
	if got, want := crc16("123456789"), uint16(0x31C3); got != want {
		t.Fatalf("crc16 check value = %#x, want %#x", got, want) // from the Redis Cluster spec
	}
	if got, want := keySlot("{user1000}.following"), keySlot("user1000"); got != want {
		t.Fatalf("hash tag slot = %d, want %d", got, want)
	}
	slots := map[uint16]bool{}
	for _, item := range []int64{1, 7, 42, 1000, 65535, 4294967295} {
		keys := []string{store.StockKey(item), store.BuyersKey(item), store.InFlightKey(item), tokenKey(item, "0123456789abcdef01234567")}
		want := keySlot("item:" + strconv.FormatInt(item, 10))
		for _, k := range keys {
			if !strings.Contains(k, "{item:"+strconv.FormatInt(item, 10)+"}") {
				t.Errorf("key %q lacks the hash tag of item %d", k, item)
			}
			if got := keySlot(k); got != want {
				t.Errorf("key %q in slot %d, want %d", k, got, want)
			}
		}
		slots[want] = true
	}
	if len(slots) < 2 {
		t.Errorf("every item hashes to the same slot %v: the tag does not spread items", slots)
	}

	s, rdb := newStock(t)
	ctx := context.Background()
	const item = 77
	load(t, s, item, 2, 5)
	if _, err := s.Reserve(ctx, item, 6, "o", "nonce", time.Minute, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, item, []string{"o"}); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 4 {
		t.Errorf("keys after load, reserve and claim = %v, want stock, buyers, in flight and the token marker", keys)
	}
	for _, k := range keys {
		if keySlot(k) != keySlot(store.StockKey(item)) {
			t.Errorf("script created %q outside the item's slot", k)
		}
	}
}

// A refusal because the shopper already holds a live order gives the unit back but keeps the
// shopper a buyer, so the next attempt is refused in Redis instead of looping through Postgres.
func TestReleaseKeepBuyer(t *testing.T) {
	t.Parallel()
	st, rdb := newStock(t)
	ctx := context.Background()
	const item = 31
	if _, err := st.Load(ctx, item, 5, []int64{7}); err != nil {
		t.Fatal(err)
	}
	// Redis lost the buyer (say, rebuilt wrongly): the shopper reserves a second unit.
	rdb.SRem(ctx, store.BuyersKey(item), 7)
	if _, err := st.Reserve(ctx, item, 7, "o-dup", "nonce-dup", time.Minute, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(ctx, item, []string{"o-dup"}); err != nil {
		t.Fatal(err)
	}
	out, err := st.ReleaseKeepBuyer(ctx, item, "o-dup")
	if err != nil || out != store.Released {
		t.Fatalf("ReleaseKeepBuyer = %v, %v; want Released", out, err)
	}
	if n, _ := rdb.Get(ctx, store.StockKey(item)).Int64(); n != 5 {
		t.Errorf("stock after the release = %d, want 5 (the unit returns)", n)
	}
	if ok, _ := rdb.SIsMember(ctx, store.BuyersKey(item), 7).Result(); !ok {
		t.Errorf("the shopper is no longer a buyer, want kept")
	}
	if n, _ := rdb.HLen(ctx, store.InFlightKey(item)).Result(); n != 0 {
		t.Errorf("in flight after the release = %d, want 0", n)
	}
}
