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
	maxPayWindowMinutes = strconv.Itoa(shop.MaxPaymentWindowSeconds / 60)
	defaultCurrency     = shop.Currencies[0].Code
)

// currencyLabel is a currency as the create form offers it: "CNY (¥, yuan)".
func currencyLabel(c shop.Currency) string { return c.Code + " (" + c.Symbol + ", " + c.Unit + ")" }
