package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// The keeper's warm pass goes through every sale even when one fails: on a Redis Cluster whose
// master holding sale A is down, sale B (on another master), which Redis lost, is still rebuilt.
// Before, the pass stopped at A's error on every round, and B stayed closed as long as A's node
// was down.
func TestKeeperWarmsTheOtherSalesWhenOneFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.NewRedisCluster(t, 3, 0) // no replica: a dead master's slots stay down
	h := newHarness(t, harnessOpts{redisURL: c.URL(), env: map[string]string{"FLASHSALE_PUBLISH_TIMEOUT": "1s"}})

	// A first (the keeper goes through sales in order), then B on another master.
	a := h.createSaleWith(nil, time.Now().Add(-time.Second), 3)
	ma := c.MustMasterOf(t, store.MetaKey(a.sale))
	var b saleIDs
	for i := 0; ; i++ {
		if i == 30 {
			t.Fatal("30 sales all on sale A's master")
		}
		b = h.createSaleWith(nil, time.Now().Add(-time.Second), 3)
		if c.MustMasterOf(t, store.MetaKey(b.sale)) != ma {
			break
		}
	}
	mb := c.MustMasterOf(t, store.MetaKey(b.sale))

	// Redis loses sale B (its keys deleted on its master), and sale A's master dies.
	if _, err := mb.Do(ctx, "del", store.MetaKey(b.sale), store.StockKey(b.sale, b.items[0])); err != nil {
		t.Fatal(err)
	}
	c.MustKill(t, ma)
	if _, err := h.app.Stock.State(ctx, a.sale); err == nil {
		t.Fatal("sale A's state read with its master dead")
	}

	// B is rebuilt from Postgres (after the rebuild delay, about 2 s) while A's node stays down.
	testenv.Eventually(t, 20*time.Second, "sale B rebuilt after Redis lost it, while sale A's master is down", func() error {
		st, err := h.app.Stock.State(ctx, b.sale)
		if err == nil && st.Loaded && !st.Lost {
			return nil
		}
		return fmt.Errorf("state %+v, %v", st, err)
	})
	if n, err := h.app.Redis.Get(ctx, store.StockKey(b.sale, b.items[0])).Int64(); err != nil || n != 3 {
		t.Errorf("sale B's stock after the rebuild: %d, %v; want 3", n, err)
	}
}
