package catalog

import (
	"context"
	"errors"

	"github.com/flashsale/flashsale/shop"
)

// DrawPage is how many entries one page of a draw's record holds.
const DrawPage = 100

// Draw returns a merchant's sale's fair-start draw (window, entries, winners, when it closed)
// and a page of its record, best rank first: every entry, its rank and what it became, so the
// merchant can show a shopper the draw was fair. A sale without a fair start has an empty draw.
func (s *Sales) Draw(ctx context.Context, merchantID, saleID int64, cursor string) (shop.Draw, []shop.DrawEntry, string, error) {
	if _, err := s.ownSale(ctx, merchantID, saleID); err != nil {
		return shop.Draw{}, nil, "", err
	}
	d, err := s.db.DrawOf(ctx, saleID)
	if err != nil {
		return shop.Draw{}, nil, "", shop.Unavailable(err)
	}
	rec, next, err := s.db.DrawRecord(ctx, saleID, cursor, DrawPage) // a cursor not given out: 400, from the store's decoder
	var se *shop.Error
	if errors.As(err, &se) {
		return shop.Draw{}, nil, "", err
	}
	if err != nil {
		return shop.Draw{}, nil, "", shop.Unavailable(err)
	}
	return d, rec, next, nil
}
