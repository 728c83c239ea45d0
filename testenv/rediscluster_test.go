package testenv_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// TestRedisCluster starts a 3-master, 1-replica cluster, checks the slot helpers against Redis's
// own answer, kills a master, waits for its replica's promotion and brings the old master back
// as a replica, with a written key surviving all of it.
func TestRedisCluster(t *testing.T) {
	ctx := context.Background()
	c := testenv.NewRedisCluster(t, 3, 1)
	if len(c.Nodes) != 6 || !strings.HasPrefix(c.URL(), "redis-cluster://") {
		t.Fatalf("%d nodes, url %s", len(c.Nodes), c.URL())
	}
	for _, key := range []string{"a", "{sale:1}:meta", "{sale:2}:stock:7", "foo{}{bar}", "{}x", "captcha:abc"} {
		v, err := c.Nodes[0].Do(ctx, "cluster", "keyslot", key)
		if err != nil {
			t.Fatal(err)
		}
		if got := testenv.KeySlot(key); int64(got) != v.(int64) {
			t.Errorf("KeySlot(%q) = %d, redis says %d", key, got, v)
		}
	}

	rdb, err := store.OpenRedis(ctx, c.URL(), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("OpenRedis(%s) = %T, want a cluster client", c.URL(), rdb)
	}
	writeSpread(t, ctx, c, rdb)
	checkFailover(t, ctx, c, rdb, "{sale:1}:meta")
}

// writeSpread writes 30 sales' keys through the client: each is on the node MasterOf names,
// and they spread over the three masters.
func writeSpread(t *testing.T, ctx context.Context, c *testenv.RedisCluster, rdb redis.UniversalClient) {
	t.Helper()
	masters := map[string]bool{}
	for i := range 30 {
		key := fmt.Sprintf("{sale:%d}:meta", i)
		if err := rdb.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		m := c.MustMasterOf(t, key)
		masters[m.Addr] = true
		// The node MasterOf names holds the key itself (no redirection).
		if v, err := m.Do(ctx, "get", key); err != nil || v != fmt.Sprint(i) {
			t.Errorf("GET %s on %s = %v, %v", key, m.Addr, v, err)
		}
	}
	if len(masters) != 3 {
		t.Errorf("30 sales landed on %d masters, want 3", len(masters))
	}
}

// checkFailover kills key's master, waits for its replica's promotion, reads key through the
// client from the new master, and brings the old master back as its replica.
func checkFailover(t *testing.T, ctx context.Context, c *testenv.RedisCluster, rdb redis.UniversalClient, key string) {
	t.Helper()
	old := c.MustMasterOf(t, key)
	reps, err := c.ReplicasOf(ctx, old)
	if err != nil || len(reps) != 1 {
		t.Fatalf("replicas of %s: %v, %v", old.Addr, reps, err)
	}
	if err := c.WaitHealthy(ctx); err != nil { // the SETs above reached the replicas
		t.Fatal(err)
	}
	c.MustKill(t, old)
	heir := c.MustWaitFailover(t, old)
	if heir != reps[0] {
		t.Errorf("%s took over, want the replica %s", heir.Addr, reps[0].Addr)
	}
	if now := c.MustMasterOf(t, key); now != heir {
		t.Errorf("master of %s is %s after the failover, want %s", key, now.Addr, heir.Addr)
	}
	// The client follows the failover at once (go-redis alone would re-read the slot map only
	// after a minute): the first GET re-reads it and its retries reach the new master; under a
	// loaded machine a second GET may be needed.
	for start := time.Now(); ; {
		v, err := rdb.Get(ctx, key).Result()
		if err == nil && v == "1" {
			break
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("GET %s through the client 2 s after the failover = %q, %v", key, v, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.MustRestart(t, old)
	if reps, err := c.ReplicasOf(ctx, heir); err != nil || len(reps) != 1 || reps[0] != old {
		t.Errorf("replicas of the new master %s: %v, %v; want the old master back as one", heir.Addr, reps, err)
	}
}
