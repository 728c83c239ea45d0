package store

import (
	"strings"

	"github.com/flashsale/flashsale/shop"
)

// The rows of sales and items stay in this package: every method that reads or writes a sale
// speaks shop.Sale, converted here.

// business is the sale a row holds, items in the order given.
func (r saleRow) business() shop.Sale {
	s := shop.Sale{ID: r.ID, MerchantID: r.MerchantID, Name: r.Name, StartsAt: r.StartsAt, EndsAt: r.EndsAt, CreatedAt: r.CreatedAt,
		PaymentWindowSeconds: r.PaymentWindowSeconds, PurchaseLimit: r.PurchaseLimit, Currency: r.Currency, Paused: r.Paused,
		StockShards: max(r.StockShards, 1), Epoch: r.RedisEpoch, FairStartMillis: r.FairStartMillis, DrawClosedAt: r.DrawClosedAt,
		DrawSeed: r.DrawSeed, DrawPauses: r.DrawPauses}
	if r.DrillOf != nil {
		s.DrillOf = *r.DrillOf
	}
	if r.Description != nil {
		s.Description = *r.Description
	}
	if r.UserRatePerSec != nil || r.IPRatePerSec != nil {
		l := shop.DefaultRateLimits
		if r.UserRatePerSec != nil {
			l.UserPerSecond = *r.UserRatePerSec
		}
		if r.IPRatePerSec != nil {
			l.IPPerSecond = *r.IPRatePerSec
		}
		s.Limits = &l
	}
	if r.Items != nil {
		s.Items = make([]shop.Item, len(r.Items))
		for i, it := range r.Items {
			s.Items[i] = it.business()
		}
	}
	return s
}

func (r itemRow) business() shop.Item {
	it := shop.Item{ID: r.ID, SaleID: r.SaleID, Position: r.Position, Name: r.Name, PriceCents: r.PriceCents, Quantity: r.Quantity,
		Sold: r.Sold, MaxSeq: r.MaxSeq}
	if r.ImageURL != nil {
		it.ImageURL = *r.ImageURL
	}
	return it
}

// saleRowOf is the row of a sale ("" for the description or an image: NULL).
func saleRowOf(s shop.Sale) saleRow {
	r := saleRow{ID: s.ID, MerchantID: s.MerchantID, Name: s.Name, StartsAt: s.StartsAt, EndsAt: s.EndsAt, CreatedAt: s.CreatedAt,
		PaymentWindowSeconds: s.PaymentWindowSeconds, PurchaseLimit: s.PurchaseLimit, Currency: s.Currency, Paused: s.Paused,
		StockShards: s.StockShards, RedisEpoch: s.Epoch, Description: nullable(s.Description), FairStartMillis: s.FairStartMillis,
		DrawClosedAt: s.DrawClosedAt, DrawSeed: s.DrawSeed, DrawPauses: s.DrawPauses}
	if s.DrillOf != 0 {
		of := s.DrillOf
		r.DrillOf = &of
	}
	if l := s.Limits; l != nil {
		user, ip := l.UserPerSecond, l.IPPerSecond
		r.UserRatePerSec, r.IPRatePerSec = &user, &ip
	}
	if s.Items != nil {
		r.Items = make([]itemRow, len(s.Items))
		for i, it := range s.Items {
			r.Items[i] = itemRowOf(it)
		}
	}
	return r
}

func itemRowOf(it shop.Item) itemRow {
	return itemRow{ID: it.ID, SaleID: it.SaleID, Position: it.Position, Name: it.Name, PriceCents: it.PriceCents, Quantity: it.Quantity,
		Sold: it.Sold, MaxSeq: it.MaxSeq, ImageURL: nullable(it.ImageURL)}
}

// nullable is NULL for "".
func nullable(s string) *string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return &s
}

func salesOf(rows []saleRow) []shop.Sale {
	out := make([]shop.Sale, len(rows))
	for i, r := range rows {
		out[i] = r.business()
	}
	return out
}

// TableName is the table of the sales' rows (GORM would name it after the type).
func (saleRow) TableName() string { return "sales" }

// TableName is the table of the items' rows.
func (itemRow) TableName() string { return "items" }
