package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// A Redis that refuses writes (out of memory, unable to persist, read-only, without replicas)
// refuses a script's write exactly as a plain one, and Redis 7 reports it from inside the script
// ("… script: SHA, on @user_script:1."): it is an outage, never the request's fault. Only what
// the same input always produces (a Lua runtime error, a key of the wrong type, a command the
// script called with a bad argument) is an answer that may dead-letter a message. Every error
// here is a real Redis's.
func TestIsAnsweredByKindNotByPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rs := testenv.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { rdb.Close() })
	write := redis.NewScript(`return redis.call('SET', KEYS[1], 'x')`)

	outage := outageChecker(t, rdb, write)
	for _, r := range testenv.Refusals {
		lift := rs.Refuse(t, r)
		outage(string(r), map[testenv.Refusal]string{testenv.RefuseOOM: "OOM", testenv.RefuseMISCONF: "MISCONF", testenv.RefuseReadOnly: "READONLY"}[r])
		lift()
		if err := write.Run(ctx, rdb, []string{"k"}).Err(); err != nil {
			t.Fatalf("%s lifted: a write answered %v", r, err)
		}
	}
	if err := rdb.ConfigSet(ctx, "min-replicas-to-write", "1").Err(); err != nil {
		t.Fatal(err)
	}
	outage("noreplicas", "NOREPLICAS")
	if err := rdb.ConfigSet(ctx, "min-replicas-to-write", "0").Err(); err != nil {
		t.Fatal(err)
	}
	scriptFailuresAreAnswers(t, rdb)

	// Not an answer at all: unreachable, cancelled.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := rdb.Get(cctx, "k").Err(); err == nil || store.IsAnswered(err) {
		t.Errorf("cancelled: %v, IsAnswered must be false", err)
	}
	if store.IsAnswered(redis.Nil) || store.IsAnswered(errors.New("user_script:1: looks like one")) {
		t.Error("redis.Nil or a plain error taken for an answer")
	}
}

// outageChecker checks, while Redis refuses writes with the error kind (name: the case), that
// write's refusal is raised inside the script and is an outage (not answered), as a plain SET's.
func outageChecker(t *testing.T, rdb *redis.Client, write *redis.Script) func(name, kind string) {
	ctx := context.Background()
	return func(name, kind string) {
		t.Helper()
		err := write.Run(ctx, rdb, []string{"k"}).Err()
		if err == nil || !strings.HasPrefix(err.Error(), kind) || !strings.Contains(err.Error(), "@user_script") {
			t.Fatalf("%s: a script's write answered %v, want a %s error raised inside the script", name, err, kind)
		}
		if store.IsAnswered(err) {
			t.Errorf("%s: IsAnswered(%q) = true, want false: an outage, not the message's fault", name, err)
		}
		if got, want := store.ErrorCause(err), "redis_"+strings.ToLower(kind); got != want {
			t.Errorf("%s: ErrorCause = %q, want %q", name, got, want)
		}
		if err := rdb.Set(ctx, "k", "x", 0).Err(); err == nil || store.IsAnswered(err) {
			t.Errorf("%s: a plain SET answered %v; IsAnswered must be false", name, err)
		}
	}
}

// scriptFailuresAreAnswers: what the same input always produces (a Lua runtime error, a key of
// the wrong type, a bad argument, the script's own error) is an answer.
func scriptFailuresAreAnswers(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	if err := rdb.Set(ctx, "str", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"runtime error":  `return tonumber(redis.call('GET', KEYS[1])) > 0`,
		"wrong type":     `return redis.call('HGET', KEYS[1], 'f')`,
		"bad argument":   `return redis.call('INCRBY', KEYS[1], 'x')`,
		"own error":      `return redis.error_reply('transfer: unknown op')`,
		"undefined name": `return nosuch.field`,
	} {
		err := redis.NewScript(src).Run(ctx, rdb, []string{"str"}).Err()
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		if !store.IsAnswered(err) {
			t.Errorf("%s: IsAnswered(%q) = false, want true: the same input always fails so", name, err)
		}
		if got := store.ErrorCause(err); got != "redis" {
			t.Errorf("%s: ErrorCause = %q, want redis", name, got)
		}
	}
}
