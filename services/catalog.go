package services

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/store"
)

// Sale is a sale as the HTTP layer and the pages see it; they never see the store's rows.
type Sale struct {
	ID                   int64
	MerchantID           int64
	Name                 string
	StartsAt             time.Time
	EndsAt               time.Time
	PaymentWindowSeconds int
	PurchaseLimit        string // "per-sale" or "per-item"
	Currency             string // ISO 4217; prices are in its minor units
	Description          string // "" when none
	Paused               bool   // the merchant paused it: purchases answer 503 PAUSED
	StockShards          int    // the Redis shards its stock is split into (1: not split)
	Items                []Item
}

// Item is one product of a Sale.
type Item struct {
	ID         int64
	SaleID     int64
	Name       string
	PriceCents int64
	Quantity   int
	ImageURL   string // "" when none
}

func saleOf(s store.Sale) Sale {
	out := Sale{ID: s.ID, MerchantID: s.MerchantID, Name: s.Name, StartsAt: s.StartsAt, EndsAt: s.EndsAt,
		PaymentWindowSeconds: s.PaymentWindowSeconds, PurchaseLimit: s.PurchaseLimit, Currency: s.Currency,
		Paused: s.Paused, StockShards: max(s.StockShards, 1), Items: make([]Item, len(s.Items))}
	if s.Description != nil {
		out.Description = *s.Description
	}
	for i, it := range s.Items {
		out.Items[i] = Item{ID: it.ID, SaleID: it.SaleID, Name: it.Name, PriceCents: it.PriceCents, Quantity: it.Quantity}
		if it.ImageURL != nil {
			out.Items[i].ImageURL = *it.ImageURL
		}
	}
	return out
}

func salesOf(rows []store.Sale) []Sale {
	out := make([]Sale, len(rows))
	for i, s := range rows {
		out[i] = saleOf(s)
	}
	return out
}

// Create validates and stores a new sale of merchantID, then loads its stock into Redis.
func (s *Sales) Create(ctx context.Context, merchantID int64, in NewSale) (Sale, error) {
	row, err := s.create(ctx, merchantID, in)
	if err != nil {
		return Sale{}, err
	}
	return saleOf(row), nil
}

// Get returns a sale with its items, from Postgres.
func (s *Sales) Get(ctx context.Context, saleID int64) (Sale, error) {
	row, err := s.getRow(ctx, saleID)
	if err != nil {
		return Sale{}, err
	}
	return saleOf(row), nil
}

// Cached returns a sale from the in-process catalog cache (a few seconds old at most; unknown ids
// are remembered too).
func (s *Sales) Cached(ctx context.Context, saleID int64) (Sale, error) {
	row, err := s.cachedRow(ctx, saleID)
	if err != nil {
		return Sale{}, err
	}
	return saleOf(row), nil
}
