package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/shop"
)

// oneSale is a Catalog that knows one sale.
type oneSale struct {
	Catalog
	sale shop.Sale
}

func (c oneSale) Cached(_ context.Context, id int64) (shop.Sale, error) {
	if id != c.sale.ID {
		return shop.Sale{}, shop.Errorf(shop.CodeNotFound, "no sale %d", id)
	}
	return c.sale, nil
}

// unfoldICS undoes RFC 5545's folding: a CRLF followed by one space joins the lines.
func unfoldICS(s string) []string {
	return strings.Split(strings.TrimSuffix(strings.ReplaceAll(s, "\r\n ", ""), "\r\n"), "\r\n")
}

// GET /sales/{id}/calendar.ics is an RFC 5545 calendar of one event: the sale's window in UTC,
// its name escaped as TEXT, its page as the URL, an alarm 5 minutes before; every line ends in
// CRLF and none is longer than 75 octets (a long name is folded, never inside a character); the
// same for every visitor, cached like the sale page, an attachment; an unknown sale is not found.
func TestSaleCalendar(t *testing.T) {
	now := time.Date(2031, 3, 4, 12, 0, 0, 0, time.UTC)
	shanghai := time.FixedZone("CST", 8*3600)
	name := `Spring, sale; 50% off \ all` + "\n" + strings.Repeat("限时抢购", 12)
	sale := shop.Sale{ID: 42, Name: name, Description: "Line one,\nline two",
		StartsAt: time.Date(2031, 3, 5, 20, 0, 0, 0, shanghai), EndsAt: time.Date(2031, 3, 5, 21, 30, 0, 0, shanghai)}
	p := &Pages{Catalog: oneSale{sale: sale}, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}
	r := gin.New()
	r.GET("/sales/:saleId/calendar.ics", p.Calendar)
	r.GET("/sales/:saleId", p.Calendar) // the route's sibling: both register side by side
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Host = "shop.example"
		r.ServeHTTP(w, req)
		return w
	}
	w := get("/sales/42/calendar.ics")
	if w.Code != http.StatusOK {
		t.Fatalf("GET calendar.ics = %d, want 200", w.Code)
	}
	if ct := w.Header().Get("Content-Type"); ct != "text/calendar; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cd := w.Header().Get("Content-Disposition"); cd != `attachment; filename="sale-42.ics"` {
		t.Errorf("Content-Disposition = %q", cd)
	}
	if cc := w.Header().Get("Cache-Control"); cc != publicPage {
		t.Errorf("Cache-Control = %q, want the sale page's %q", cc, publicPage)
	}
	body := w.Body.String()
	if again := get("/sales/42/calendar.ics").Body.String(); again != body {
		t.Errorf("two downloads differ; want the same calendar for every visitor")
	}
	if !strings.HasSuffix(body, "\r\n") || strings.Contains(strings.ReplaceAll(body, "\r\n", ""), "\n") {
		t.Errorf("every line must end in CRLF, and no bare LF:\n%q", body)
	}
	folded := false
	for _, l := range strings.Split(strings.TrimSuffix(body, "\r\n"), "\r\n") {
		if len(l) > 75 {
			t.Errorf("line of %d octets (at most 75): %q", len(l), l)
		}
		if !utf8.ValidString(l) {
			t.Errorf("a fold split a character: %q", l)
		}
		folded = folded || strings.HasPrefix(l, " ")
	}
	if !folded {
		t.Errorf("the long name was not folded:\n%s", body)
	}
	want := []string{
		"BEGIN:VCALENDAR",
		"VERSION:2.0",
		"PRODID:-//flashsale//flash sale reminder//EN",
		"CALSCALE:GREGORIAN",
		"METHOD:PUBLISH",
		"BEGIN:VEVENT",
		"UID:sale-42@flashsale",
		"DTSTAMP:20310304T120000Z",
		"DTSTART:20310305T120000Z",
		"DTEND:20310305T133000Z",
		`SUMMARY:Spring\, sale\; 50% off \\ all\n` + strings.Repeat("限时抢购", 12),
		`DESCRIPTION:Line one\,\nline two`,
		"URL:http://shop.example/sales/42",
		"BEGIN:VALARM",
		"ACTION:DISPLAY",
		`DESCRIPTION:Spring\, sale\; 50% off \\ all\n` + strings.Repeat("限时抢购", 12),
		"TRIGGER:-PT5M",
		"END:VALARM",
		"END:VEVENT",
		"END:VCALENDAR",
	}
	got := unfoldICS(body)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("calendar (unfolded) =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if w := get("/sales/7/calendar.ics"); w.Code != http.StatusNotFound {
		t.Errorf("unknown sale: %d, want 404", w.Code)
	}
}

// foldICS folds at exactly 75 octets, then 74 after the continuation's space.
func TestFoldICS(t *testing.T) {
	for _, n := range []int{1, 74, 75, 76, 149, 150, 300} {
		l := strings.Repeat("a", n)
		out := foldICS(l)
		if strings.ReplaceAll(strings.TrimSuffix(out, "\r\n"), "\r\n ", "") != l {
			t.Errorf("%d: unfolded differs", n)
		}
		for _, part := range strings.Split(strings.TrimSuffix(out, "\r\n"), "\r\n") {
			if len(part) > 75 {
				t.Errorf("%d: part of %d octets", n, len(part))
			}
		}
		if n > 75 && len(strings.SplitN(out, "\r\n", 2)[0]) != 75 {
			t.Errorf("%d: first line not 75 octets", n)
		}
	}
}

// The calendar file is cached for every visitor (publicPage; nginx keys it by path): its URL is
// the configured public address (FLASHSALE_PUBLIC_URL), whatever Host header a client sends, so a
// forged Host never reaches another visitor's calendar; with no address set it is the request's
// own, as before.
func TestSaleCalendarURLIsThePublicAddress(t *testing.T) {
	sale := shop.Sale{ID: 42, Name: "Spring sale", StartsAt: time.Date(2031, 3, 5, 12, 0, 0, 0, time.UTC), EndsAt: time.Date(2031, 3, 5, 13, 0, 0, 0, time.UTC)}
	urlLine := func(publicURL, host string) string {
		t.Helper()
		p := &Pages{Catalog: oneSale{sale: sale}, Log: slog.New(slog.DiscardHandler), Now: time.Now, PublicURL: publicURL}
		r := gin.New()
		r.GET("/sales/:saleId/calendar.ics", p.PublicOrigin, p.Calendar) // as web.routePages registers it
		w := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/sales/42/calendar.ics", nil)
		req.Host = host
		req.Header.Set("X-Forwarded-Proto", "http")
		r.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("GET calendar.ics (Host %s) = %d", host, w.Code)
		}
		for _, l := range unfoldICS(w.Body.String()) {
			if strings.HasPrefix(l, "URL:") {
				return l
			}
		}
		t.Fatalf("no URL line:\n%s", w.Body.String())
		return ""
	}
	for _, host := range []string{"shop.example.com", "evil.example", "evil.example:8443"} {
		for _, public := range []string{"https://shop.example.com", "https://shop.example.com/"} {
			if got := urlLine(public, host); got != "URL:https://shop.example.com/sales/42" {
				t.Errorf("PublicURL %s, Host %s: %s, want the public address's page", public, host, got)
			}
		}
	}
	if got := urlLine("", "shop.example.org"); got != "URL:http://shop.example.org/sales/42" {
		t.Errorf("no PublicURL: %s, want the request's own address", got)
	}
}
