package views

import (
	"math"
	"testing"
)

func TestFormatPrice(t *testing.T) {
	tests := []struct {
		cents int64
		want  string
	}{
		{0, "¥0.00"},
		{5, "¥0.05"},
		{10, "¥0.10"},
		{1234, "¥12.34"},
		{100000, "¥1000.00"},
		{-250, "-¥2.50"},
		{math.MinInt64, "-¥92233720368547758.08"},
	}
	for _, tt := range tests {
		if got := formatPrice(tt.cents); got != tt.want {
			t.Errorf("formatPrice(%d) = %q, want %q", tt.cents, got, tt.want)
		}
	}
}

func TestMoneyText(t *testing.T) {
	for _, tt := range []struct {
		minor    int64
		currency string
		want     string
	}{
		{1999, "CNY", "¥19.99"}, {1999, "", "¥19.99"}, {1999, "usd", "$19.99"}, {5, "EUR", "€0.05"},
		{100, "JPY", "¥100"}, {-250, "USD", "-$2.50"}, {1999, "CHF", "19.99 CHF"},
		{math.MinInt64, "CNY", "-¥92,233,720,368,547,758.08"},
		{99900, "CNY", "¥999.00"}, {100000, "CNY", "¥1,000.00"}, {123456789, "USD", "$1,234,567.89"}, {1000000, "JPY", "¥1,000,000"},
	} {
		if got := moneyText(tt.minor, tt.currency); got != tt.want {
			t.Errorf("moneyText(%d, %q) = %q, want %q", tt.minor, tt.currency, got, tt.want)
		}
	}
}
