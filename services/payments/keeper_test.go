package payments

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/flashsale/flashsale/store"
)

// A provider call that keeps failing is tried again after the pass interval times 2^n, up to
// maxRetryWait; one that succeeds is due again at once.
func TestBackoffSpacesOutFailures(t *testing.T) {
	var b backoff
	now := time.Unix(1_800_000_000, 0)
	if !b.due("refund x", now) {
		t.Fatal("a call never tried is not due")
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}
	for i, w := range want {
		if got := b.failed("refund x", now, time.Second); got != w {
			t.Fatalf("failure %d: wait %v, want %v", i+1, got, w)
		}
	}
	if b.due("refund x", now.Add(7*time.Second)) || !b.due("refund x", now.Add(8*time.Second)) {
		t.Fatal("due before its wait, or not after it")
	}
	if !b.due("refund y", now) {
		t.Fatal("another order's call waits for this one's")
	}
	for range 30 {
		b.failed("refund x", now, time.Second)
	}
	if got := b.failed("refund x", now, time.Second); got != maxRetryWait {
		t.Fatalf("after many failures: wait %v, want the cap %v", got, maxRetryWait)
	}
	b.done("refund x")
	if !b.due("refund x", now) {
		t.Fatal("a call that succeeded is not due at once next time")
	}
}

// keeperDB is the part of Postgres the keeper reads and writes, in memory.
type keeperDB struct {
	DB                         // the rest is not used by Pass
	open     map[string]string // order -> session, checkouts of ended orders still open
	closed   map[string]string // order -> expired or complete
	due      map[string]string // order -> payment to refund
	refunded map[string]string // order -> refund id
	failed   map[string]string // order -> why the refund was refused for good
}

func (d *keeperDB) CheckoutsToExpire(_ context.Context, provider string, skip []string, limit int) ([]store.CheckoutToExpire, error) {
	var out []store.CheckoutToExpire
	for o, s := range d.open {
		if !slices.Contains(skip, o) && len(out) < limit {
			out = append(out, store.CheckoutToExpire{OrderID: o, Provider: provider, SessionID: s})
		}
	}
	return out, nil
}

func (d *keeperDB) CheckoutsDue(context.Context, string, []string, int) ([]store.CheckoutDue, error) {
	return nil, nil
}

func (d *keeperDB) CloseCheckout(_ context.Context, orderID, state string) error {
	delete(d.open, orderID)
	d.closed[orderID] = state
	return nil
}

func (d *keeperDB) RefundsDue(_ context.Context, provider string, skip []string, limit int) ([]store.RefundDue, error) {
	var out []store.RefundDue
	for o, pi := range d.due {
		if !slices.Contains(skip, pi) && len(out) < limit {
			out = append(out, store.RefundDue{OrderID: o, Provider: provider, PaymentID: pi})
		}
	}
	return out, nil
}

func (d *keeperDB) RecordRefund(_ context.Context, r store.RefundDue, refundID string) error {
	delete(d.due, r.OrderID)
	d.refunded[r.OrderID] = refundID
	return nil
}

func (d *keeperDB) RecordRefundFailure(_ context.Context, r store.RefundDue, reason string) error {
	delete(d.due, r.OrderID)
	d.failed[r.OrderID] = reason
	return nil
}

// flakyProvider fails its first fails calls of each kind, then answers; session "paid" was
// completed before it could be expired.
type flakyProvider struct {
	Simulated
	fails          int
	expires, refus int
	attempts       []int // the Attempt of each refund call
}

func (f *flakyProvider) ExpireSession(_ context.Context, session string) error {
	if f.expires++; f.expires <= f.fails {
		return errors.New("provider down")
	}
	if session == "paid" {
		return ErrSessionComplete
	}
	return nil
}

func (f *flakyProvider) Refund(_ context.Context, r RefundRequest) (string, error) {
	f.attempts = append(f.attempts, r.Attempt)
	if f.refus++; f.refus <= f.fails {
		return "", errors.New("provider down")
	}
	if r.PaymentID == "pi_disputed" {
		return "", &RefundRefusal{RefundID: "re_x", Reason: "charge_disputed"}
	}
	return "re_" + r.OrderID, nil
}

// The keeper expires the checkouts of ended orders and makes the refunds due, trying again after
// failures (spaced out) until the provider answers; a session the provider says was paid is
// recorded complete (its payment's confirmation refunds it).
func TestKeeperRetriesUntilTheProviderAnswers(t *testing.T) {
	db := &keeperDB{open: map[string]string{"o1": "cs_1", "o2": "paid"}, closed: map[string]string{},
		due: map[string]string{"o3": "pi_3"}, refunded: map[string]string{}, failed: map[string]string{}}
	prov := &flakyProvider{fails: 3}
	now := time.Unix(1_800_000_000, 0)
	p := New(Config{Interval: time.Second}, Deps{Provider: prov, DB: db, Now: func() time.Time { return now }})
	passes := 0
	for ; passes < 100 && (len(db.open) > 0 || len(db.due) > 0); passes++ {
		p.Pass(context.Background())
		now = now.Add(time.Second)
	}
	if len(db.open) > 0 || len(db.due) > 0 {
		t.Fatalf("after %d passes: open %v, refunds due %v", passes, db.open, db.due)
	}
	if db.closed["o1"] != store.CheckoutExpired || db.closed["o2"] != store.CheckoutComplete || db.refunded["o3"] != "re_o3" {
		t.Fatalf("closed %v, refunded %v: want o1 expired, o2 complete, o3 refunded", db.closed, db.refunded)
	}
	// Spaced out: 3 failures each, then the answer, over about 2+4+8 s, not 3 passes.
	if passes < 10 || prov.expires > 3+2+3 || prov.refus > 3+1 {
		t.Fatalf("%d passes, %d expire and %d refund calls: want the retries spaced out", passes, prov.expires, prov.refus)
	}
	// Each refund call that got no verdict is followed by one under the next attempt (a new
	// idempotency key, asking first): Stripe would replay a stored 500 under the old one.
	if !slices.Equal(prov.attempts, []int{0, 1, 2, 3}) {
		t.Fatalf("refund attempts %v, want 0, 1, 2, 3", prov.attempts)
	}
}

// A refund the provider refuses for good is recorded with its reason once and never asked again;
// the other refunds go on.
func TestKeeperRecordsARefusedRefund(t *testing.T) {
	db := &keeperDB{open: map[string]string{}, closed: map[string]string{}, refunded: map[string]string{}, failed: map[string]string{},
		due: map[string]string{"o1": "pi_disputed", "o2": "pi_2"}}
	prov := &flakyProvider{}
	p := New(Config{Interval: time.Second}, Deps{Provider: prov, DB: db})
	for range 5 {
		p.Pass(context.Background())
	}
	if db.failed["o1"] != "charge_disputed" || db.refunded["o2"] != "re_o2" || len(db.due) != 0 {
		t.Fatalf("failed %v, refunded %v, due %v: want o1's refusal recorded with its reason, o2 refunded", db.failed, db.refunded, db.due)
	}
	if prov.refus != 2 {
		t.Fatalf("%d refund calls over 5 passes, want 2 (a refusal for good is not asked again)", prov.refus)
	}
}
