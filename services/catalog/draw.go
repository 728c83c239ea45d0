package catalog

import (
	"context"
	"errors"

	"github.com/flashsale/flashsale/shop"
)

// DrawPage is how many entries one page of a draw's record holds.
const DrawPage = 100

// Draw returns a merchant's sale's fair-start draw (window, entries, winners, pauses, when it
// closed, its commitment) and, once it is decided, a page of its record, best rank first: every
// entry, its rank and what it became. Until the draw is decided it gives counts only: nobody, the
// merchant included, may watch who is entering while what the entries compete for could still
// change. A sale without a fair start has an empty draw.
func (s *Sales) Draw(ctx context.Context, merchantID, saleID int64, cursor string) (shop.Draw, []shop.DrawEntry, string, error) {
	if _, err := s.ownSale(ctx, merchantID, saleID); err != nil {
		return shop.Draw{}, nil, "", err
	}
	return s.drawAndRecord(ctx, saleID, cursor)
}

// PublicDraw is a sale's draw as anyone may check it: counts until it is decided, then the seed
// and the record (the caller shows no shopper). A sale without a fair start, or a fire drill's
// copy, has none: 404.
func (s *Sales) PublicDraw(ctx context.Context, saleID int64, cursor string) (shop.Draw, []shop.DrawEntry, string, error) {
	sale, err := s.getRow(ctx, saleID)
	if err != nil {
		return shop.Draw{}, nil, "", err
	}
	if sale.FairStartMillis <= 0 || sale.DrillOf != 0 {
		return shop.Draw{}, nil, "", shop.Errorf(shop.CodeNotFound, "sale %d has no fair-start draw", saleID)
	}
	return s.drawAndRecord(ctx, saleID, cursor)
}

func (s *Sales) drawAndRecord(ctx context.Context, saleID int64, cursor string) (shop.Draw, []shop.DrawEntry, string, error) {
	d, err := s.db.DrawOf(ctx, saleID)
	if err != nil {
		return shop.Draw{}, nil, "", shop.Unavailable(err)
	}
	if !d.Decided() {
		return d, nil, "", nil
	}
	rec, next, err := s.db.DrawRecord(ctx, saleID, cursor, DrawPage) // a cursor not given out: 400, from the store
	var se *shop.Error
	if errors.As(err, &se) {
		return shop.Draw{}, nil, "", err
	}
	if err != nil {
		return shop.Draw{}, nil, "", shop.Unavailable(err)
	}
	return d, rec, next, nil
}
