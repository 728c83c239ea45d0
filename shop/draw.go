package shop

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Fair start: a sale may hold a draw for the first FairStartMillis after its start. A purchase in
// that window does not take a unit in arrival order: it enters the draw. Once the window has
// closed and every entry acknowledged is written, the units go to the best draw keys, all at
// once (PENDING), the others end NOT_SELECTED. After the window: first come, first served, as in
// any sale.
//
// Commit, then reveal: each sale has a secret seed of DrawSeedSize random bytes, drawn when it is
// created; a sale with a fair start publishes its commitment (DrawCommitment) before its window
// opens, and its seed once the draw is decided. An entry's draw key is HMAC-SHA256 under the seed
// of its order id (DrawKey), compared as a big-endian number, smallest first: whoever holds the
// seed and the entries' order ids can recompute the whole draw, and whoever holds the commitment
// can check that the seed was fixed before anyone entered.

// DrawSeedSize is the length of a sale's draw seed in bytes.
const DrawSeedSize = 32

// NewDrawSeed draws a sale's secret seed.
func NewDrawSeed() []byte {
	seed := make([]byte, DrawSeedSize)
	_, _ = rand.Read(seed) // crypto/rand.Read never fails (it crashes the program instead)
	return seed
}

// DrawCommitment is the public commitment to a seed: the lowercase hex SHA-256 of its bytes.
func DrawCommitment(seed []byte) string {
	sum := sha256.Sum256(seed)
	return hex.EncodeToString(sum[:])
}

// DrawKey is an entry's draw key: HMAC-SHA256 (key: the seed's bytes, message: the order id as
// text). Within an item, the smallest keys win.
func DrawKey(seed []byte, orderID string) []byte {
	m := hmac.New(sha256.New, seed)
	m.Write([]byte(orderID))
	return m.Sum(nil)
}

// Commitment is the sale's draw commitment ("" for a sale without a fair start or a seed).
func (s Sale) Commitment() string {
	if s.FairStartMillis <= 0 || len(s.DrawSeed) != DrawSeedSize {
		return ""
	}
	return DrawCommitment(s.DrawSeed)
}

// RevealedSeed is the sale's seed in lowercase hex once its draw is decided ("" before, and for a
// sale without a fair start).
func (s Sale) RevealedSeed() string {
	if s.Commitment() == "" || s.DrawClosedAt == nil {
		return ""
	}
	return hex.EncodeToString(s.DrawSeed)
}

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

// Draw is a sale's draw.
type Draw struct {
	WindowMillis int
	Entries      int        // entries written (once closed: the entries it decided)
	Winners      int        // units given by the draw (0 until closed)
	ClosedAt     *time.Time // nil while open (or not yet decided)
	Pauses       int        // pauses while it was undecided
	Commitment   string     // the seed's commitment ("" without a fair start)
	Seed         string     // the seed, lowercase hex, once decided ("" before)
	Items        []DrawItem // once decided: the units each item offered to it
}

// Decided tells whether the draw was decided.
func (d Draw) Decided() bool { return d.ClosedAt != nil }

// DrawItem is what one item offered to a decided draw: its best Units ranks won.
type DrawItem struct {
	ItemID int64
	Units  int
}

// DrawEntry is one line of a draw's record: the entry, its rank and what the draw made of it.
type DrawEntry struct {
	OrderID   string
	UserID    int64
	Username  string
	ItemID    int64
	Rank      int64 // once decided, its place among its item's ranked entries (1: the best); 0: unranked
	EnteredAt time.Time
	Status    string // ENTERED while open; then PENDING/PAID/EXPIRED/CANCELLED (won) or NOT_SELECTED
}

// Won tells whether an entry got a unit.
func (e DrawEntry) Won() bool { return e.Status != StatusEntered && e.Status != StatusNotSelected }
