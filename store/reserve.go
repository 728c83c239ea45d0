package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Attempt is one purchase attempt as the reserve script sees it.
type Attempt struct {
	SaleID, ItemID, UserID int64
	OrderID                string
	Nonce                  string    // the purchase token's nonce: one attempt per token
	TokenExpires           time.Time // checked against Redis's clock
	Floor                  int64     // the highest reservation seq this instance saw in the shopper's shard of the sale
	Entry                  bool      // it may fall in its sale's draw window: sent with the draw's keys
}

// Reservation is what the reserve script granted, or the refusal's details.
type Reservation struct {
	Left       int64     // units left after it
	Seq        int64     // the sale's reservation counter value
	ReservedAt time.Time // Redis's clock
	HeldOrder  string    // with ErrAlreadyBuyer: the order the shopper holds
	RetryAfter time.Duration
	Shard      int  // the shopper's shard (0 in a sale of one shard)
	Borrowed   bool // the shopper's shard ran dry and borrowed units from the others
	AllEmpty   bool // with ErrSoldOut: no shard holds a unit and none is in transit
	// Lender and LenderSeq: the shard a borrow took units from and its seq after that step (0:
	// no units taken). The caller keeps it as its floor of that shard: a failover that lost the
	// step leaves the shard's counter below it, and the reserve script refuses there (-5).
	Lender    int
	LenderSeq int64
	// Again: the same attempt (same token, same order id) was made before and reserved; this
	// answer is about that reservation (reserve.lua's -10 and -11), no unit was taken now.
	// Durable: with Again, the writer holds its order (claimed from the queue, or written): it
	// needs no publish. Without Durable it is still in flight, perhaps not queued: whoever
	// answers for it publishes it again and claims it, and must never release it (the first
	// send may have answered 202 for it).
	Again, Durable bool
	// Entered: the attempt fell in the sale's draw window and entered the draw (no unit taken):
	// the caller publishes the entry (store.QueuedOrder with Draw). A resend of it answers the
	// same. Its rank is not known before the draw is decided (shop.DrawKey).
	Entered bool
}

// ErrDrawClosing: the sale's draw window has closed and its draw is not applied in the shopper's
// shard yet; nothing was attempted (the token is kept). ErrRankNeeded: the attempt fell in the
// draw window and was not sent as an entry (Attempt.Entry); nothing was attempted.
var (
	ErrDrawClosing = errors.New("the fair start's draw is being decided")
	ErrRankNeeded  = errors.New("the attempt is a draw entry and was not sent as one")
)

// Reserve runs the reserve script: it consumes the purchase token and, if the shopper is not yet
// a buyer and a unit is left, takes the unit and registers the order in flight. It returns one of
// the Err refusals above otherwise. Sending the same attempt (same order id) again returns the
// same refusal, or, for an attempt that reserved, its reservation with Again set (Durable once
// the writer holds it), or ErrTokenAlreadyUsed once its unit went back; so a retry after a lost
// reply cannot take a second unit, nor bring back a released one.
//
// In a sharded sale the attempt runs in the shopper's shard; when that shard has no unit of the
// item left, units are borrowed from the shard holding the most (a logged transfer) and the
// attempt runs once more in the shopper's shard.
func (s *Stock) Reserve(ctx context.Context, a Attempt) (Reservation, error) {
	k, err := s.shards.get(ctx, a.SaleID)
	if err != nil {
		return Reservation{}, fmt.Errorf("reserve(sale %d, item %d): %w", a.SaleID, a.ItemID, err)
	}
	shard := ShardOf(a.UserID, k)
	r, code, err := s.reserveIn(ctx, a, shard, k > 1)
	if err == nil && code == -9 {
		moved, lent, berr := s.borrow(ctx, a.SaleID, k, shard, a.ItemID)
		r, code, err = s.reserveIn(ctx, a, shard, false)
		r.Borrowed = moved
		r.Lender, r.LenderSeq = lent.From, lent.Seq
		if err != nil {
			err = errors.Join(err, berr)
		}
	}
	if err != nil {
		return Reservation{}, err
	}
	if code >= 0 {
		return r, nil // a reservation: code is the units left
	}
	return s.answer(ctx, a, k, r, code)
}

// refusals are the reserve script's answers that are refusals and nothing more.
var refusals = map[int64]error{-2: ErrAlreadyBuyer, -3: ErrStockUnknown, -4: ErrTokenAlreadyUsed, -6: ErrNotStarted,
	-7: ErrEnded, -8: ErrPaused, -13: ErrDrawClosing, -14: ErrRankNeeded}

// answer turns the reserve script's negative code into the reservation and the refusal it says
// (see lua/reserve.lua); k is the sale's shard count.
func (s *Stock) answer(ctx context.Context, a Attempt, k int, r Reservation, code int64) (Reservation, error) {
	switch code {
	case -1:
		r.AllEmpty = true
		if k > 1 {
			// Sold out in this shard: sold out everywhere only if no shard holds a unit and
			// none is in transit. Unknown (an error) counts as not sold out everywhere.
			r.AllEmpty, _ = s.allEmpty(ctx, a.SaleID, k, a.ItemID)
		}
		return r, ErrSoldOut
	case -5:
		if k > 1 {
			// the script marked its shard lost: a sharded sale fails closed as a whole
			if _, err := s.MarkLost(context.WithoutCancel(ctx), a.SaleID, 0, ""); err != nil {
				return r, errors.Join(ErrRedisWentBack, err)
			}
		}
		return r, ErrRedisWentBack
	case -10, -11:
		r.Left, r.HeldOrder = 0, ""
		r.Again, r.Durable = true, code == -10
		return r, nil
	case -12:
		r.Left, r.HeldOrder, r.Entered = 0, "", true
		return r, nil
	}
	if err, ok := refusals[code]; ok {
		return r, err
	}
	return r, fmt.Errorf("reserve: unknown code %d", code)
}

// reserveIn runs the reserve script in one shard; mayBorrow lets it answer -9 (the shard has no
// unit of the item: nothing attempted).
func (s *Stock) reserveIn(ctx context.Context, a Attempt, shard int, mayBorrow bool) (Reservation, int64, error) {
	keys := []string{MetaKeyOf(a.SaleID, shard), StockKeyOf(a.SaleID, shard, a.ItemID), BuyersKeyOf(a.SaleID, shard),
		InFlightKeyOf(a.SaleID, shard), tokenKey(a.SaleID, shard, a.Nonce), TokensKeyOf(a.SaleID, shard)}
	args := []any{a.UserID, a.OrderID, a.ItemID, a.TokenExpires.UnixMilli(), a.Floor}
	if mayBorrow || a.Entry {
		args = append(args, flag(mayBorrow))
	}
	if a.Entry {
		// a draw entry's keys: only an attempt that may fall in a draw window pays for them (one
		// that does without them is answered -14 and sent again with them)
		keys = append(keys, EntrantsKeyOf(a.SaleID, shard), DrawKeyOf(a.SaleID, shard))
		args = append(args, "1")
	}
	v, err := s.reserves.run(ctx, keys, args)
	if err != nil {
		return Reservation{}, 0, fmt.Errorf("reserve(sale %d, item %d): %w", a.SaleID, a.ItemID, err)
	}
	if len(v) != 4 {
		return Reservation{}, 0, fmt.Errorf("reserve(sale %d, item %d): unexpected reply %v", a.SaleID, a.ItemID, v)
	}
	code, _ := v[0].(int64)
	seq, _ := v[1].(int64)
	at, _ := v[2].(int64)
	held, _ := v[3].(string)
	return Reservation{Left: code, Seq: seq, ReservedAt: time.UnixMilli(at), HeldOrder: held, Shard: shard}, code, nil
}
