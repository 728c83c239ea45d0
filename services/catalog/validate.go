package catalog

import (
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/flashsale/flashsale/shop"
)

// saleInput is what a merchant sends to create a sale or to edit one, each field nil when not sent.
// The rules of a sale's fields live here and nowhere else: creating checks the whole input with
// validate; editing checks each field with the same functions where it applies it, so that an
// edit is refused in the order its changes are applied (applyEdit). What only a change can break
// (a started sale's start, a quantity below the units sold) is the edit's own; what a new sale
// must have (a window, items) the creation's (checkNew).
type saleInput struct {
	Name                 *string
	Description          *string
	PaymentWindowSeconds *int
	PurchaseLimit        *string
	Currency             *string
	StockShards          *int
	FairStartMillis      *int
	Limits               *shop.RateLimits
	Items                []itemInput
}

// itemInput is one item of a saleInput: a new item, or the change of one.
type itemInput struct {
	Name       *string
	PriceCents *int64
	Quantity   *int64
	ImageURL   *string // "" removes it (or sets none)
}

// validate checks every field sent.
func (in saleInput) validate() error {
	checks := []func() error{
		func() error { return optional(in.Name, func(v string) error { return validName("name", v) }) },
		func() error { return optional(in.Description, validDescription) },
		func() error { return optional(in.PaymentWindowSeconds, validPaymentWindow) },
		func() error { return optional(in.Currency, validCurrency) },
		func() error { return optional(in.PurchaseLimit, validPurchaseLimit) },
		func() error { return optional(in.StockShards, validStockShards) },
		func() error { return optional(in.FairStartMillis, validFairStart) },
		func() error { return optional(in.Limits, validRateLimits) },
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	for i, it := range in.Items {
		if err := it.validate(fmt.Sprintf("items[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// validate checks the item's fields sent; field names it in the messages ("items[2]").
func (it itemInput) validate(field string) error {
	if err := optional(it.Name, func(v string) error { return validName(field+".name", v) }); err != nil {
		return err
	}
	if p := it.PriceCents; p != nil && (*p < 0 || *p > shop.MaxPriceCents) {
		return shop.Errorf(shop.CodeInvalidInput, "%s.priceCents must be between 0 and %d", field, int64(shop.MaxPriceCents))
	}
	if q := it.Quantity; q != nil && (*q < 1 || *q > shop.MaxQuantity) {
		return shop.Errorf(shop.CodeInvalidInput, "%s.quantity must be between 1 and %d", field, shop.MaxQuantity)
	}
	if u := it.ImageURL; u != nil && *u != "" {
		return validImageURL(field+".imageUrl", *u)
	}
	return nil
}

// optional runs check on v when it was sent.
func optional[T any](v *T, check func(T) error) error {
	if v == nil {
		return nil
	}
	return check(*v)
}

func validName(what, s string) error {
	if strings.TrimSpace(s) == "" {
		return shop.Errorf(shop.CodeInvalidInput, "%s must not be empty", what)
	}
	if utf8.RuneCountInString(s) > shop.MaxNameRunes {
		return shop.Errorf(shop.CodeInvalidInput, "%s must be at most %d characters", what, shop.MaxNameRunes)
	}
	if !utf8.ValidString(s) {
		return shop.Errorf(shop.CodeInvalidInput, "%s must be valid UTF-8", what)
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return shop.Errorf(shop.CodeInvalidInput, "%s must not contain control characters", what)
	}
	return nil
}

func validDescription(s string) error {
	if !utf8.ValidString(s) {
		return shop.Errorf(shop.CodeInvalidInput, "description must be valid UTF-8")
	}
	if utf8.RuneCountInString(s) > shop.MaxDescriptionRunes {
		return shop.Errorf(shop.CodeInvalidInput, "description must be at most %d characters", shop.MaxDescriptionRunes)
	}
	return nil
}

func validImageURL(field, s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || len(s) > shop.MaxImageURLBytes || u.User != nil ||
		strings.ContainsAny(s, " \t\r\n\"'<>") {
		return shop.Errorf(shop.CodeInvalidInput, "%s must be an https:// address of at most %d characters", field, shop.MaxImageURLBytes)
	}
	return nil
}

func validPaymentWindow(w int) error {
	if w < 1 || w > shop.MaxPaymentWindowSeconds {
		return shop.Errorf(shop.CodeInvalidInput, "paymentWindowSeconds must be between 1 and %d (a day)", shop.MaxPaymentWindowSeconds)
	}
	return nil
}

func validPurchaseLimit(l string) error {
	if l != shop.LimitPerSale && l != shop.LimitPerItem {
		return shop.Errorf(shop.CodeInvalidInput, "purchaseLimit must be %q (one unit per shopper in the whole sale) or %q (one per shopper and item)", shop.LimitPerSale, shop.LimitPerItem)
	}
	return nil
}

func validCurrency(c string) error {
	if !shop.IsCurrency(c) {
		return shop.Errorf(shop.CodeInvalidInput, "currency must be one of %s", shop.CurrencyList())
	}
	return nil
}

func validStockShards(k int) error {
	if k < 1 || k > shop.MaxStockShards {
		return shop.Errorf(shop.CodeInvalidInput, "stockShards must be between 1 and %d", shop.MaxStockShards)
	}
	return nil
}

func validRateLimits(l shop.RateLimits) error {
	if l.UserPerSecond < 1 || l.UserPerSecond > 10_000 || l.IPPerSecond < 1 || l.IPPerSecond > 1_000_000 {
		return shop.Errorf(shop.CodeInvalidInput, "rateLimits.userPerSecond must be 1..10000 and rateLimits.ipPerSecond 1..1000000")
	}
	return nil
}

// checkWindow checks a sale's times, as created or as an edit leaves them.
func checkWindow(starts, ends time.Time) error {
	switch {
	case !ends.After(starts):
		return shop.Errorf(shop.CodeInvalidInput, "endsAt must be after startsAt")
	case ends.Sub(starts) > shop.MaxSaleLength:
		return shop.Errorf(shop.CodeInvalidInput, "a sale lasts at most 30 days")
	case starts.Year() > 9999 || starts.Year() < 2000:
		return shop.Errorf(shop.CodeInvalidInput, "startsAt is out of range")
	}
	return nil
}

// validFairStart checks a fair start's draw window.
func validFairStart(ms int) error {
	if ms < 0 || ms > shop.MaxFairStartMillis {
		return shop.Errorf(shop.CodeInvalidInput, "fairStartMillis must be between 0 (no draw) and %d", shop.MaxFairStartMillis)
	}
	return nil
}

// PriceFloor is the payment provider as the catalog asks it: the smallest amount it charges in
// a currency, in minor units (payments.Provider).
type PriceFloor interface {
	MinimumCents(currency string) int64
}

// anyPrice is the floor of a deployment without a provider: any positive price.
type anyPrice struct{}

func (anyPrice) MinimumCents(string) int64 { return 1 }

// checkPayable refuses an item price the provider cannot charge in the sale's currency: 422
// PRICE_NOT_PAYABLE naming the minimum. 0 is a free item (no payment). Only what the change
// sets is checked (every price of a new sale, or after a change of currency; a new or repriced
// item): a sale made before a floor rose keeps selling what it sold.
func checkPayable(old, next shop.Sale, floor PriceFloor) error {
	before := map[int64]int64{}
	for _, it := range old.Items {
		before[it.ID] = it.PriceCents
	}
	min := floor.MinimumCents(next.Currency)
	for i, it := range next.Items {
		prev, had := before[it.ID]
		if it.ID != 0 && had && prev == it.PriceCents && old.Currency == next.Currency {
			continue
		}
		if it.PriceCents > 0 && it.PriceCents < min {
			return &shop.Error{Code: shop.CodePriceNotPayable, MinimumCents: min, Currency: next.Currency,
				Message: fmt.Sprintf("items[%d].priceCents %d is below what the payment provider can charge in %s: at least %d, or 0 for a free item", i, it.PriceCents, next.Currency, min)}
		}
	}
	return nil
}
