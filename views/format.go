package views

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/a-h/templ"
)

// rfc3339Milli is RFC 3339 in UTC with at most three fractional digits: a sale may start
// mid-second, and HTML's datetime attribute allows no more than milliseconds.
const rfc3339Milli = "2006-01-02T15:04:05.999Z07:00"

// rfc3339 is the machine-readable form of t used in datetime and data attributes.
func rfc3339(t time.Time) string {
	return t.UTC().Format(rfc3339Milli)
}

// utcText is the human-readable fallback shown until the script localises a time.
func utcText(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// formatPrice turns cents into the "¥12.34" form.
func formatPrice(cents int64) string {
	sign := ""
	abs := uint64(cents)
	if cents < 0 {
		sign = "-"
		abs = uint64(-(cents + 1)) + 1 // safe for math.MinInt64
	}
	frac := abs % 100
	s := sign + "¥" + strconv.FormatUint(abs/100, 10) + "."
	if frac < 10 {
		s += "0"
	}
	return s + strconv.FormatUint(frac, 10)
}

// saleURL is the link to a sale page; the id is escaped as one path segment.
func saleURL(id string) templ.SafeURL {
	return templ.URL("/sales/" + url.PathEscape(id))
}

// orderURL is the link to an order page.
func orderURL(id string) templ.SafeURL {
	return templ.URL("/orders/" + url.PathEscape(id))
}

// statusLabel names a sale status for people, in the page's language.
func statusLabel(ctx context.Context, status string) string {
	m := msg(ctx)
	switch status {
	case "upcoming":
		return m.StatusUpcoming
	case "live":
		return m.StatusLive
	case "ended":
		return m.StatusEnded
	}
	return status
}

// statusClass picks the badge colour of a sale status.
func statusClass(status string) string {
	switch status {
	case "upcoming", "live", "ended":
		return "badge badge-" + status
	}
	return "badge"
}
