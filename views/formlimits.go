package views

import (
	"strconv"

	"github.com/flashsale/flashsale/shop"
)

// The create form's limits and choices come from the one table the validation reads (shop): the
// browser checks what the server will check, in the same numbers.
var (
	maxNameAttr         = strconv.Itoa(shop.MaxNameRunes)
	maxDescriptionAttr  = strconv.Itoa(shop.MaxDescriptionRunes)
	maxImageURLAttr     = strconv.Itoa(shop.MaxImageURLBytes)
	maxQuantityAttr     = strconv.Itoa(shop.MaxQuantity)
	maxItemsAttr        = strconv.Itoa(shop.MaxItemsPerSale)
	maxPayWindowMinutes = strconv.Itoa(shop.MaxPaymentWindowSeconds / 60)
	// maxFairStartSeconds is the longest draw window, in the seconds the form takes ("10").
	maxFairStartSeconds = strconv.FormatFloat(float64(shop.MaxFairStartMillis)/1000, 'f', -1, 64)
	defaultCurrency     = shop.Currencies[0].Code
)

// currencyLabel is a currency as the create form offers it: "CNY (¥, yuan)".
func currencyLabel(c shop.Currency) string { return c.Code + " (" + c.Symbol + ", " + c.Unit + ")" }

// fairStartSeconds writes a draw window as the seconds a person reads: 3000 is "3", 2500 "2.5".
func fairStartSeconds(ms int) string {
	return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64)
}
