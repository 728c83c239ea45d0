package views

import (
	"strconv"
	"strings"
)

// currencyFormat is how a currency's amounts are written: the same table as formatMoney in
// static/js/money.js, so that a price reads the same on the server-rendered pages and in the script.
type currencyFormat struct {
	symbol string
	digits int
}

var currencyFormats = map[string]currencyFormat{
	"CNY": {"¥", 2},
	"JPY": {"¥", 0},
	"USD": {"$", 2},
	"EUR": {"€", 2},
	"GBP": {"£", 2},
	"HKD": {"HK$", 2},
	"KRW": {"₩", 0},
}

// moneyText writes an amount in minor units in its currency: "¥19.99" (CNY, also for ""),
// "$19.99", "€19.99"; an unknown currency is written "19.99 XYZ".
func moneyText(minor int64, currency string) string {
	code := strings.ToUpper(currency)
	if code == "" {
		code = "CNY"
	}
	f, known := currencyFormats[code]
	if !known {
		f = currencyFormat{digits: 2}
	}
	sign := ""
	abs := uint64(minor)
	if minor < 0 {
		sign = "-"
		abs = uint64(-(minor + 1)) + 1 // safe for math.MinInt64
	}
	scale := uint64(1)
	for range f.digits {
		scale *= 10
	}
	text := strconv.FormatUint(abs/scale, 10)
	if f.digits > 0 {
		frac := strconv.FormatUint(abs%scale, 10)
		text += "." + strings.Repeat("0", f.digits-len(frac)) + frac
	}
	if !known {
		return sign + text + " " + code
	}
	return sign + f.symbol + text
}
