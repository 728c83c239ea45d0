package payments

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/flashsale/flashsale/store"
)

// LedgerDB is what the money ledger reads of a sale in Postgres (store.DB).
type LedgerDB interface {
	LedgerSessions(ctx context.Context, saleID int64, provider string) ([]string, error)
	LedgerBooks(ctx context.Context, saleID int64, provider string) (store.LedgerBooks, error)
}

// Ledger is a sale's money as the provider has it and as our books have it: every payment the
// provider captured for the sale's orders must be a paid order, a refund of a late payment, or a
// conflict (a payment that was not its order's own, refunded).
type Ledger struct {
	SaleID   int64
	Provider string
	Skipped  string // why the provider was not asked ("" when it was)

	Sessions      int   // the provider sessions asked about
	CapturedCents int64 // what the provider says those sessions took
	Books         store.LedgerBooks
	Unanswered    []string // sessions the provider did not answer about
}

// Difference is captured minus our books (0 when they agree).
func (l Ledger) Difference() int64 {
	return l.CapturedCents - l.Books.PaidCents - l.Books.RefundedCents - l.Books.ConflictCents
}

// OK reports whether the books agree with the provider (a ledger the provider could not be asked
// about, or only partly, is not OK: nothing says they agree).
func (l Ledger) OK() bool {
	return l.Skipped != "" || (l.Difference() == 0 && len(l.Unanswered) == 0)
}

// Write prints the ledger for the reconcile command.
func (l Ledger) Write(w io.Writer) {
	if l.Skipped != "" {
		fmt.Fprintf(w, "money ledger of sale %d: %s\n", l.SaleID, l.Skipped)
		return
	}
	mark := "✓"
	if !l.OK() {
		mark = "✗"
	}
	fmt.Fprintf(w, "%s money ledger of sale %d (%s): captured %d = paid %d (%d orders) + refunded %d (%d) + conflicts %d (%d)",
		mark, l.SaleID, l.Provider, l.CapturedCents, l.Books.PaidCents, l.Books.Paid, l.Books.RefundedCents, l.Books.Refunded,
		l.Books.ConflictCents, l.Books.Conflicts)
	if d := l.Difference(); d != 0 {
		fmt.Fprintf(w, "; difference %d", d)
	}
	fmt.Fprintf(w, "; %d sessions asked\n", l.Sessions)
	if l.Books.Refused > 0 {
		fmt.Fprintf(w, "  ! %d refunds (%d) refused by the provider for good: taken and not given back; settle them at the provider\n",
			l.Books.Refused, l.Books.RefusedCents)
	}
	for _, s := range l.Unanswered {
		fmt.Fprintf(w, "  ✗ the provider did not answer about session %s\n", s)
	}
}

// Ledger asks the provider about every session that took or may have taken money for the sale's
// orders (their checkouts, and the conflicts that named them) and compares what it captured with
// the books: PAID orders, refunded late payments, conflicts.
func (p *Payments) Ledger(ctx context.Context, db LedgerDB, saleID int64) (Ledger, error) {
	l := Ledger{SaleID: saleID, Provider: p.provider.Name()}
	if errors.Is(p.provider.Completed(ctx, p.now(), func(string, SessionState) error { return nil }), ErrNoLookup) {
		l.Skipped = "the " + l.Provider + " provider keeps no books of its own to compare with (no money moves)"
		return l, nil
	}
	sessions, err := db.LedgerSessions(ctx, saleID, l.Provider)
	if err != nil {
		return l, err
	}
	if l.Books, err = db.LedgerBooks(ctx, saleID, l.Provider); err != nil {
		return l, err
	}
	for _, s := range sessions {
		st, err := p.lookupRetrying(ctx, s)
		l.Sessions++
		if err != nil {
			l.Unanswered = append(l.Unanswered, s)
			continue
		}
		if st.Status == SessionComplete && st.Paid {
			l.CapturedCents += st.AmountCents
		}
	}
	return l, nil
}

// lookupRetrying asks about a session, a few times if the provider gives no answer.
func (p *Payments) lookupRetrying(ctx context.Context, session string) (SessionState, error) {
	var err error
	for i := range 3 {
		var st SessionState
		st, err = p.lookup(ctx, session)
		if err == nil || errors.Is(err, ErrNoLookup) || !transient(err) {
			return st, err
		}
		time.Sleep(time.Duration(i+1) * 200 * time.Millisecond)
	}
	return SessionState{}, err
}
