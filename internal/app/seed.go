package app

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"strconv"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/shop"
)

// The development demo accounts (listed in the README).
var demoAccounts = []struct{ Username, Password, Role string }{
	{"merchant", "merchant-pass", auth.RoleMerchant},
	{"alice", "alice-pass", auth.RoleShopper},
	{"bob", "bob-pass", auth.RoleShopper},
}

// seedDemo creates the demo accounts if missing and a demo sale starting after delay, with three
// items of 100, 1,000 and 10,000 units.
func seedDemo(ctx context.Context, a *App, delay time.Duration, log *slog.Logger) error {
	var merchantID int64
	for _, acc := range demoAccounts {
		u, err := a.Auth.AddUser(ctx, acc.Username, acc.Password, acc.Role)
		if shop.ErrorCode(err) == shop.CodeUsernameTaken {
			_, id, err := a.Auth.Login(ctx, acc.Username, acc.Password, "seed")
			if err != nil {
				return err
			}
			u.ID = id.UserID
		} else if err != nil {
			return err
		}
		if acc.Role == auth.RoleMerchant {
			merchantID = u.ID
		}
	}
	start := a.now().Add(delay).Truncate(time.Second)
	sale, err := a.sales.Create(ctx, merchantID, catalog.NewSale{
		Name:     "Demo flash sale " + start.Format("15:04:05"),
		StartsAt: start,
		EndsAt:   start.Add(30 * time.Minute),
		Items: []catalog.NewItem{
			{Name: "Limited sneakers", PriceCents: 49900, Quantity: 100},
			{Name: "Wireless earbuds", PriceCents: 9900, Quantity: 1000},
			{Name: "Coffee beans 250 g", PriceCents: 1999, Quantity: 10000},
		},
	})
	if err != nil {
		return err
	}
	log.Info("demo sale created", "sale", sale.ID, "starts_at", sale.StartsAt.Format(time.RFC3339),
		"page", "/sales/"+itoa(sale.ID), "merchant", "merchant / merchant-pass", "shoppers", "alice / alice-pass, bob / bob-pass")
	return nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func randomPassword() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
