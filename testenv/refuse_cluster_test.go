package testenv_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// TestRedisClusterRefuse makes one master of a cluster refuse writes each way a cluster node can
// (out of memory, unable to persist, not enough replicas): a script's write to one of its slots
// answers the refusal's kind while its reads are served and the other masters take writes; once
// lifted, the write goes through and nothing was lost. Read-only is refused with the reason.
func TestRedisClusterRefuse(t *testing.T) {
	ctx := context.Background()
	c := testenv.NewRedisCluster(t, 3, 1)
	rdb, err := store.OpenRedis(ctx, c.URL(), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	const key = "{sale:1}:meta"
	if err := rdb.HSet(ctx, key, "seq", "7").Err(); err != nil {
		t.Fatal(err)
	}
	node := c.MustMasterOf(t, key)
	other := ""
	for i := 0; other == ""; i++ {
		if k := fmt.Sprintf("other:%d", i); c.MustMasterOf(t, k) != node {
			other = k
		}
	}
	write := func() error {
		return rdb.Eval(ctx, `return redis.call('HINCRBY', KEYS[1], 'seq', 1)`, []string{key}).Err()
	}
	want := map[testenv.Refusal]string{testenv.RefuseOOM: "OOM", testenv.RefuseMISCONF: "MISCONF", testenv.RefuseNoReplicas: "NOREPLICAS"}
	for _, kind := range []testenv.Refusal{testenv.RefuseOOM, testenv.RefuseMISCONF, testenv.RefuseNoReplicas} {
		lift := c.MustRefuse(t, node, kind)
		if err := write(); err == nil || !strings.HasPrefix(err.Error(), want[kind]) {
			t.Errorf("%s: a script's write answered %v, want %s", kind, err, want[kind])
		}
		if v, err := rdb.HGet(ctx, key, "seq").Result(); err != nil || v != "7" {
			t.Errorf("%s: a read answered %q, %v; want 7", kind, v, err)
		}
		if err := rdb.Set(ctx, other, "x", 0).Err(); err != nil {
			t.Errorf("%s: a write to another master answered %v", kind, err)
		}
		lift()
		if err := write(); err != nil {
			t.Fatalf("%s lifted: a write answered %v", kind, err)
		}
		if err := rdb.HIncrBy(ctx, key, "seq", -1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Refuse(ctx, node, testenv.RefuseReadOnly); err == nil || !strings.Contains(err.Error(), "REPLICAOF") {
		t.Errorf("read-only on a cluster node: %v, want an error naming REPLICAOF", err)
	}
}
