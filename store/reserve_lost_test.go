package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// Redis comes back from its disk without its last writes (a crash under appendfsync everysec):
// an instance that saw a later seq detects it at its next reserve, the sale fails closed, and
// the rebuild from Postgres moves the counter past every seq issued before.
func TestReserveAfterRedisLostWrites(t *testing.T) {
	t.Parallel()
	s, rdb, rs := newStockServer(t)
	ctx := context.Background()
	const sale, item = 17, 170
	snap := snapshot(t, s, sale, shop.LimitPerSale, item, 5)
	mustLoad(t, s, snap, 0)
	r1 := mustReserve(t, s, attempt(t, s, sale, item, 1, "o1", "n1"))
	// Under appendfsync everysec Redis may postpone writing acknowledged writes to the file (while
	// a background fsync runs): a rewrite puts everything so far on disk before the copy.
	rewriteAOF(t, rdb)
	saved := rs.CopyData(t)
	r2 := mustReserve(t, s, attempt(t, s, sale, item, 2, "o2", "n2"))
	rs.Restore(t, saved)

	if st := stateOf(t, s, sale); st.Seq != r1.Seq || st.Lost {
		t.Fatalf("state after the restore = %+v; want seq %d (o2 lost), not marked", st, r1.Seq)
	}
	if got := stockOf(t, rdb, sale, item); got != 4 {
		t.Fatalf("stock after the restore = %d, want 4", got)
	}
	// The instance that reserved o2 saw seq r2.Seq: its next attempt finds the counter behind.
	a := attempt(t, s, sale, item, 3, "o3", "n3")
	a.Floor = r2.Seq
	if _, err := s.Reserve(ctx, a); !errors.Is(err, store.ErrRedisWentBack) {
		t.Fatalf("reserve with a floor above the restored counter: %v, want ErrRedisWentBack", err)
	}
	if !stateOf(t, s, sale).Lost {
		t.Errorf("the sale is not marked lost")
	}
	// The token of o2 is gone with the lost writes; the rebuild voids tokens issued before it.
	snap.Epoch, snap.MaxSeq = 2, r2.Seq
	snap.Left = map[int64]int64{item: 3}
	snap.Buyers = map[string]string{"1": "o1", "2": "o2"}
	mustLoad(t, s, snap, 2*time.Minute)
	if _, err := s.Reserve(ctx, attempt(t, s, sale, item, 4, "o4", "n2")); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("a token issued before the rebuild: %v, want ErrTokenAlreadyUsed", err)
	}
	b := attempt(t, s, sale, item, 4, "o4", "n4")
	b.TokenExpires = redisNow(t, s).Add(3 * time.Minute)
	b.Floor = r2.Seq
	if r := mustReserve(t, s, b); r.Seq <= r2.Seq || r.Left != 2 {
		t.Errorf("reservation after the rebuild = %+v; want a seq above %d, 2 left", r, r2.Seq)
	}
}

// rewriteAOF runs BGREWRITEAOF and waits for it to finish: the data set as of now is on disk.
func rewriteAOF(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	if err := rdb.BgRewriteAOF(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		info, err := rdb.Info(ctx, "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "aof_rewrite_in_progress:0") && strings.Contains(info, "aof_rewrite_scheduled:0") {
			if !strings.Contains(info, "aof_last_bgrewrite_status:ok") {
				t.Fatalf("aof rewrite failed:\n%s", info)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("aof rewrite not done after 10s:\n%s", info)
		}
	}
}

// A retry after a lost reply sends the same attempt again: it gets the same answer, and takes no
// second unit.
func TestReserveIdempotentRetry(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item, last = 14, 140, 141
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 5, last, 1), 0)

	a := attempt(t, s, sale, item, 1, "o1", "n1")
	r1 := mustReserve(t, s, a)
	seq := stateOf(t, s, sale).Seq
	time.Sleep(3 * time.Millisecond) // a retry later in time still answers the first reply's time
	mustReserve(t, s, attempt(t, s, sale, item, 2, "o2", "n2"))
	r2, err := s.Reserve(ctx, a)
	want := r1
	want.Left, want.Again = 0, true // a retried reservation answers it was made before, and no units
	if err != nil || r2 != want {
		t.Errorf("retry of a success = %+v, %v; want %+v", r2, err, want)
	}
	if got := stockOf(t, rdb, sale, item); got != 3 {
		t.Errorf("stock = %d, want 3 (one unit per attempt)", got)
	}
	if got := stateOf(t, s, sale).Seq; got != seq+1 {
		t.Errorf("counter = %d, want %d", got, seq+1)
	}
	if n := len(inFlightRaw(t, rdb, sale)); n != 2 {
		t.Errorf("in flight = %d, want 2", n)
	}

	// A refusal too: already a buyer.
	b := attempt(t, s, sale, item, 1, "o3", "n3")
	rb1, err := s.Reserve(ctx, b)
	if !errors.Is(err, store.ErrAlreadyBuyer) || rb1.HeldOrder != "o1" {
		t.Fatalf("already a buyer = %+v, %v", rb1, err)
	}
	rb2, err := s.Reserve(ctx, b)
	if !errors.Is(err, store.ErrAlreadyBuyer) || rb2 != rb1 {
		t.Errorf("retry of an already-buyer refusal = %+v, %v; want %+v", rb2, err, rb1)
	}

	retriedSoldOutAnswersTheSame(t, s, rdb, sale, last)
}

// retriedSoldOutAnswersTheSame: sold out, and still sold out on retry even after a unit came
// back (the same answer); the same token with another order id is not a retry.
func retriedSoldOutAnswersTheSame(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale, last int64) {
	t.Helper()
	ctx := context.Background()
	mustReserve(t, s, attempt(t, s, sale, last, 3, "o4", "n4"))
	c := attempt(t, s, sale, last, 4, "o5", "n5")
	rc1, err := s.Reserve(ctx, c)
	if !errors.Is(err, store.ErrSoldOut) {
		t.Fatalf("sold out: %+v, %v", rc1, err)
	}
	if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: last, UserID: 3, OrderID: "o4"}, shop.ReleaseUnsold); out != store.Released {
		t.Fatalf("release o4 = %v", out)
	}
	rc2, err := s.Reserve(ctx, c)
	if !errors.Is(err, store.ErrSoldOut) || rc2 != rc1 {
		t.Errorf("retry of a sold-out refusal = %+v, %v; want %+v, ErrSoldOut", rc2, err, rc1)
	}
	if got := stockOf(t, rdb, sale, last); got != 1 {
		t.Errorf("stock after the retry = %d, want 1", got)
	}
	// The same token with another order id is not a retry.
	c.OrderID = "o6"
	if _, err := s.Reserve(ctx, c); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("same token, other order: %v, want ErrTokenAlreadyUsed", err)
	}
}
