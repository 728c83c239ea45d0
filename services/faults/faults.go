// Package faults injects failures at named steps for the fault suite (FLASHSALE_FAULT).
package faults

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// Fault injection for the fault suite (tests/chaos, RELIABILITY.md): FLASHSALE_FAULT names a step
// of the purchase, the writer or the reconciliation lease and what this process does to itself
// when it reaches it: `kill` sends itself SIGKILL (a real crash: no deferred code, no flush),
// `stop` sends itself SIGSTOP (a real pause, until someone sends SIGCONT). Production refuses the
// setting (internal/app/config.go). Unset, a fault point costs one atomic load.

// The named steps a fault can fire at.
const (
	AfterReserve       = "after-reserve"        // the Lua reserve succeeded; nothing published yet
	AfterPubAck        = "after-puback"         // JetStream acknowledged the order; no 202 written yet
	WriterBeforeCommit = "writer-before-commit" // the writer claimed a batch; its transaction has not run
	WriterAfterCommit  = "writer-after-commit"  // the batch's orders are committed; nothing acked
	LeaseHeld          = "lease-held"           // this instance just took or renewed the reconciliation lease
	DrawDecided        = "draw-decided"         // a fair start's draw is committed in Postgres; no Redis shard has applied it
)

var faultSteps = []string{AfterReserve, AfterPubAck, WriterBeforeCommit, WriterAfterCommit, LeaseHeld, DrawDecided}

// Spec is one parsed FLASHSALE_FAULT: at the At-th time Step is reached, do Action.
type Spec struct {
	Step   string
	Action string // "kill" or "stop"
	At     int64  // 1 = the first time
}

type faultState struct {
	spec Spec
	hits atomic.Int64
}

var activeFault atomic.Pointer[faultState]

// Parse reads "STEP:ACTION[@N]" ("" is no fault).
func Parse(s string) (*Spec, error) {
	if s == "" {
		return nil, nil
	}
	step, action, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("FLASHSALE_FAULT=%q: want STEP:ACTION[@N], e.g. after-reserve:kill@3", s)
	}
	spec := Spec{Step: step, At: 1}
	if a, n, ok := strings.Cut(action, "@"); ok {
		at, err := strconv.ParseInt(n, 10, 64)
		if err != nil || at < 1 {
			return nil, fmt.Errorf("FLASHSALE_FAULT=%q: the occurrence after @ must be a positive integer", s)
		}
		action, spec.At = a, at
	}
	if action != "kill" && action != "stop" {
		return nil, fmt.Errorf("FLASHSALE_FAULT=%q: the action must be kill or stop", s)
	}
	spec.Action = action
	known := false
	for _, st := range faultSteps {
		known = known || st == step
	}
	if !known {
		return nil, fmt.Errorf("FLASHSALE_FAULT=%q: unknown step %q (one of %s)", s, step, strings.Join(faultSteps, ", "))
	}
	return &spec, nil
}

// Set arms the process's fault (nil disarms it).
func Set(spec *Spec) {
	if spec == nil {
		activeFault.Store(nil)
		return
	}
	activeFault.Store(&faultState{spec: *spec})
}

// Reached marks that this process reached step. With a matching armed fault, on its occurrence,
// the process signals itself: SIGKILL does not return; SIGSTOP returns once continued.
func Reached(step string) {
	f := activeFault.Load()
	if f == nil || f.spec.Step != step {
		return
	}
	if f.hits.Add(1) != f.spec.At {
		return
	}
	// One line on stderr first, so the suite's logs show where the process stopped.
	fmt.Fprintf(os.Stderr, "FAULT %s:%s@%d pid %d\n", step, f.spec.Action, f.spec.At, os.Getpid())
	signalSelf(f.spec.Action == "stop")
}
