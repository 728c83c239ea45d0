package shop

import "time"

// Fair start: a sale may hold a draw for the first FairStartMillis after its start. A purchase in
// that window does not take a unit in arrival order: it enters the draw with a random rank that
// the shopper cannot influence or predict (DrawRank). Once the window has closed and every
// entry acknowledged is written, the units go to the best ranks, all at once (PENDING), the others
// end NOT_SELECTED. After the window: first come, first served, as in any sale.

// MaxFairStartMillis is the longest draw window a sale may have.
const MaxFairStartMillis = 10_000

// DrawWindowEnd is when a sale's draw window closes (the start itself when it has none).
func (s Sale) DrawWindowEnd() time.Time { return drawWindowEnd(s.StartsAt, s.FairStartMillis) }

// DrawWindowEnd is when the item's sale's draw window closes (the start itself when it has none).
func (i ItemInfo) DrawWindowEnd() time.Time { return drawWindowEnd(i.StartsAt, i.FairStartMillis) }

func drawWindowEnd(startsAt time.Time, fairStartMillis int) time.Time {
	return startsAt.Add(time.Duration(fairStartMillis) * time.Millisecond)
}

// NotSelectedMessage tells an entrant the draw did not pick them.
func NotSelectedMessage() string {
	return "This sale's first moments were a draw: every purchase in them had the same chance, whatever its speed. You were not drawn this time; nothing was charged."
}

// Draw is a sale's draw as the merchant sees it.
type Draw struct {
	WindowMillis int
	Entries      int        // entries written (once closed: the entries it decided)
	Winners      int        // units given by the draw (0 until closed)
	ClosedAt     *time.Time // nil while open (or not yet decided)
}

// DrawEntry is one line of a draw's record: the entry, its rank and what the draw made of it.
type DrawEntry struct {
	OrderID   string
	UserID    int64
	Username  string
	ItemID    int64
	Rank      int64 // lower is better; drawn by the server, uniform over [0, 2^53)
	EnteredAt time.Time
	Status    string // ENTERED while open; then PENDING/PAID/EXPIRED/CANCELLED (won) or NOT_SELECTED
}

// Won tells whether an entry got a unit.
func (e DrawEntry) Won() bool { return e.Status != StatusEntered && e.Status != StatusNotSelected }
