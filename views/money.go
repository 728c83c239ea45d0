package views

import (
	"strconv"
	"strings"

	"github.com/flashsale/flashsale/shop"
)

// currencyFormat is how a currency's amounts are written: the same table as formatMoney in
// static/js/money.js, so that a price reads the same on the server-rendered pages and in the script.
type currencyFormat struct {
	symbol string
	digits int
}

// currencyFormats are the currencies a sale may be priced in (shop.Currencies), and a few more
// that are only ever written.
var currencyFormats = func() map[string]currencyFormat {
	m := map[string]currencyFormat{"JPY": {"¥", 0}, "GBP": {"£", 2}, "HKD": {"HK$", 2}, "KRW": {"₩", 0}}
	for _, c := range shop.Currencies {
		m[c.Code] = currencyFormat{c.Symbol, c.Digits}
	}
	return m
}()

// moneyText writes an amount in minor units in its currency: "¥19.99" (CNY, also for ""),
// "$1,999.00", "€19.99"; an unknown currency is written "19.99 XYZ". The thousands are grouped
// with commas, as Intl.NumberFormat writes them for both page languages (en, zh-CN), so the
// script's prices (static/js/money.js) read the same.
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
	text := groupThousands(strconv.FormatUint(abs/scale, 10))
	if f.digits > 0 {
		frac := strconv.FormatUint(abs%scale, 10)
		text += "." + strings.Repeat("0", f.digits-len(frac)) + frac
	}
	if !known {
		return sign + text + " " + code
	}
	return sign + f.symbol + text
}

// groupThousands puts a comma between each three digits from the right: "1234567" → "1,234,567".
func groupThousands(digits string) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	head := len(digits) % 3
	if head > 0 {
		b.WriteString(digits[:head])
	}
	for i := head; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}
