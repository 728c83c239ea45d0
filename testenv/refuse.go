package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Refusal is a way a live Redis refuses writes while it keeps its data and answers reads: the
// outages a Redis in production goes through, made for real (no proxy, no fake reply).
type Refusal string

const (
	// RefuseOOM: maxmemory cut below what is used, under noeviction: every write answers
	// "OOM command not allowed when used memory > 'maxmemory'".
	RefuseOOM Refusal = "oom"
	// RefuseMISCONF: a snapshot fails to be written (its file cannot be moved into place, as on
	// a full or broken disk) while save points are set: every write answers "MISCONF …".
	RefuseMISCONF Refusal = "misconf"
	// RefuseReadOnly: the node is made a replica (of a master that does not answer, so it keeps
	// its data): every write answers "READONLY You can't write against a read only replica".
	RefuseReadOnly Refusal = "readonly"
)

// Refusals lists every Refusal.
var Refusals = []Refusal{RefuseOOM, RefuseMISCONF, RefuseReadOnly}

// RedisRefuse makes the Redis at addr, whose data directory is dataDir, refuse writes in the way
// kind says, and returns the function that lifts the refusal (writes are accepted again, the data
// untouched). It returns once a write is refused.
func RedisRefuse(addr, dataDir string, kind Refusal) (lift func() error, err error) {
	return refuseAt(addr, dataDir, kind, "testenv:refusal-probe")
}

// refuseAt is RedisRefuse with the key it writes to check the refusal (on a cluster node, one of
// the node's own slots).
func refuseAt(addr, dataDir string, kind Refusal, probe string) (lift func() error, err error) {
	switch kind {
	case RefuseOOM:
		lift, err = refuseOOM(addr)
	case RefuseMISCONF:
		lift, err = refuseMISCONF(addr, dataDir)
	case RefuseReadOnly:
		lift, err = refuseReadOnly(addr)
	case RefuseNoReplicas:
		lift, err = refuseNoReplicas(addr)
	default:
		return nil, fmt.Errorf("unknown refusal %q", kind)
	}
	if err != nil {
		return nil, err
	}
	// Refused now? A plain write must answer with the refusal's kind.
	_, err = redisDo(addr, "SET", probe, "1")
	if want := refusalPrefix[kind]; err == nil || !strings.HasPrefix(err.Error(), want) {
		_ = lift()
		return nil, fmt.Errorf("redis %s: a write of %s after the %s refusal answered %v, want %s", addr, probe, kind, err, want)
	}
	return lift, nil
}

// refuseOOM cuts maxmemory to 1 byte under noeviction; lift restores no limit and the policy.
func refuseOOM(addr string) (lift func() error, err error) {
	policy, err := configGet(addr, "maxmemory-policy")
	if err != nil {
		return nil, err
	}
	if err := redisDoAll(addr, []string{"CONFIG", "SET", "maxmemory-policy", "noeviction"}, []string{"CONFIG", "SET", "maxmemory", "1"}); err != nil {
		return nil, err
	}
	return func() error {
		return redisDoAll(addr, []string{"CONFIG", "SET", "maxmemory", "0"}, []string{"CONFIG", "SET", "maxmemory-policy", policy})
	}, nil
}

// refuseMISCONF makes a snapshot fail with a save point set. The snapshot's final name
// (dump.rdb, dbfilename's default; the setting itself is protected) is a directory: the child
// writes its temporary file, fails to rename it into place, and Redis records the failed save;
// with a save point set, writes are refused until a save succeeds or the operator says so.
// lift removes the save point, the directory and the temporary files.
func refuseMISCONF(addr, dataDir string) (lift func() error, err error) {
	final := filepath.Join(dataDir, "dump.rdb")
	if err := os.Mkdir(final, 0o755); err != nil {
		return nil, fmt.Errorf("a directory in place of the snapshot: %w", err)
	}
	if err := redisDoAll(addr, []string{"CONFIG", "SET", "save", "3600 1"}); err != nil {
		_ = os.Remove(final)
		return nil, err
	}
	lift = func() error {
		err := redisDoAll(addr, []string{"CONFIG", "SET", "save", ""})
		_ = os.RemoveAll(final)
		matches, _ := filepath.Glob(filepath.Join(dataDir, "temp-*.rdb"))
		for _, m := range matches {
			_ = os.Remove(m)
		}
		return err
	}
	if err := waitSnapshotFailed(addr); err != nil {
		_ = lift()
		return nil, err
	}
	return lift, nil
}

// refuseReadOnly makes the node a replica of a master that does not answer; lift makes it a
// master again.
func refuseReadOnly(addr string) (lift func() error, err error) {
	if err := redisDoAll(addr, []string{"REPLICAOF", "127.0.0.1", "1"}); err != nil {
		return nil, err
	}
	return func() error { return redisDoAll(addr, []string{"REPLICAOF", "NO", "ONE"}) }, nil
}

// refuseNoReplicas asks for one replica more than are connected before a write is taken; lift
// restores min-replicas-to-write.
func refuseNoReplicas(addr string) (lift func() error, err error) {
	old, err := configGet(addr, "min-replicas-to-write")
	if err != nil {
		return nil, err
	}
	info, err := redisDo(addr, "INFO", "replication")
	if err != nil {
		return nil, err
	}
	replicas, _ := strconv.Atoi(infoFields(info)["connected_slaves"])
	if err := redisDoAll(addr, []string{"CONFIG", "SET", "min-replicas-to-write", strconv.Itoa(replicas + 1)}); err != nil {
		return nil, err
	}
	return func() error { return redisDoAll(addr, []string{"CONFIG", "SET", "min-replicas-to-write", old}) }, nil
}

// waitSnapshotFailed asks the Redis at addr for a snapshot until one has failed (a save in
// progress is waited for), up to 20 s.
func waitSnapshotFailed(addr string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := redisDo(addr, "BGSAVE"); err != nil && !strings.Contains(err.Error(), "in progress") {
			return err
		}
		time.Sleep(50 * time.Millisecond)
		info, _ := redisDo(addr, "INFO", "persistence")
		if strings.Contains(info, "rdb_last_bgsave_status:err") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis %s: the failing snapshot never failed", addr)
		}
	}
}

// mustLift wraps a refusal's lift for a test: the returned function fails the test if lifting
// fails, and the refusal is lifted when the test ends if it was not.
func mustLift(t testing.TB, what string, l func() error) (lift func()) {
	done := false
	lift = func() {
		if done {
			return
		}
		done = true
		if err := l(); err != nil {
			t.Fatalf("testenv: %s: lift: %v", what, err)
		}
	}
	t.Cleanup(func() {
		if !done {
			done = true
			_ = l()
		}
	})
	return lift
}

func configGet(addr, name string) (string, error) {
	c := redisAt(addr)
	defer c.Close()
	m, err := c.ConfigGet(context.Background(), name).Result()
	if err != nil {
		return "", fmt.Errorf("CONFIG GET %s: %w", name, err)
	}
	return m[name], nil
}

func redisDoAll(addr string, cmds ...[]string) error {
	for _, c := range cmds {
		if _, err := redisDo(addr, c...); err != nil {
			return fmt.Errorf("%s: %w", strings.Join(c, " "), err)
		}
	}
	return nil
}

// redisDo sends one command to the Redis at addr alone (redisAt) and returns its reply when it
// is text (a status, a bulk string: INFO, BGSAVE); an error reply is returned as an error with
// Redis's text.
func redisDo(addr string, args ...string) (string, error) {
	c := redisAt(addr)
	defer c.Close()
	a := make([]any, len(args))
	for i, v := range args {
		a[i] = v
	}
	v, err := c.Do(context.Background(), a...).Result()
	s, _ := v.(string)
	return s, err
}

// Refuse makes this server refuse writes as kind says (RedisRefuse) and returns the function
// that lifts it; the refusal is also lifted when the test ends.
func (r *RedisServer) Refuse(t testing.TB, kind Refusal) (lift func()) {
	t.Helper()
	l, err := RedisRefuse(r.Addr, r.dataDir, kind)
	if err != nil {
		t.Fatalf("testenv: redis %s: refuse %s: %v", r.Addr, kind, err)
	}
	return mustLift(t, fmt.Sprintf("redis %s: %s", r.Addr, kind), l)
}
