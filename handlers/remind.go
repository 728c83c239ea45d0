package handlers

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/shop"
)

// Reminders is what the API needs to count a shopper's "Remind me" (catalog.Sales.Remind).
type Reminders interface {
	Remind(ctx context.Context, saleID int64, reminderID string) error
}

type remindRequest struct {
	ReminderID string `json:"reminderId"`
}

// Remind handles the "POST /api/flash-sales/:saleId/remind" route: a signed-in shopper asked to
// be reminded of the sale's start (the auth middleware answers 401 UNAUTHENTICATED without a
// session; a merchant gets 403 FORBIDDEN). It counts the shopper once, whatever the browser:
// what is counted is the shopper's id (shopperReminder), so a second remind, an undo and a remind
// again, or another browser add nothing, and the count (the merchant's live view, the fire
// drill's crowd) cannot be inflated by sending made-up browser ids. The body's reminderId (the
// browser's random id) is still checked, but not counted. It answers 204. Nothing of it touches
// the purchase path: one HyperLogLog per sale in Redis.
func (a *API) Remind(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	who := caller(c)
	if who.Role != auth.RoleShopper {
		Error(c, a.Log, shop.Errorf(shop.CodeForbidden, "reminders count shoppers: log in with a shopper account to be reminded"))
		return
	}
	if !allowRead(c, a.Reads, a.Log) {
		return
	}
	id, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	var in remindRequest
	if err := decodeJSON(c, &in, false); err != nil {
		Error(c, a.Log, err)
		return
	}
	if !catalog.ValidReminderID(in.ReminderID) {
		Error(c, a.Log, shop.Errorf(shop.CodeInvalidInput, "reminderId must be %d to %d letters, digits or hyphens", catalog.ReminderIDMin, catalog.ReminderIDMax))
		return
	}
	if err := a.Reminders.Remind(c.Request.Context(), id, shopperReminder(who.UserID)); err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// shopperReminder is what a sale's reminders count for a shopper: "shopper-" and the user id in
// 19 digits, a reminder id to catalog.ValidReminderID. Only these are counted, never an id a
// browser sends.
func shopperReminder(userID int64) string {
	return fmt.Sprintf("shopper-%019d", userID)
}

// Calendar handles the "GET /sales/:saleId/calendar.ics" route: the sale as a calendar entry
// (RFC 5545), the same for every visitor and cached like the sale page.
func (p *Pages) Calendar(c *gin.Context) {
	s, ok := p.saleOfPath(c)
	if !ok {
		return
	}
	c.Header("Cache-Control", publicPage)
	c.Header("Content-Disposition", `attachment; filename="sale-`+idString(s.ID)+`.ics"`)
	c.Data(http.StatusOK, "text/calendar; charset=utf-8", SaleCalendar(s, origin(c)+"/sales/"+idString(s.ID), p.Now()))
}

// SaleCalendar is a sale as an RFC 5545 calendar: one event from its start to its end (UTC), its
// name as the summary, its page as the URL, an alarm 5 minutes before the start. The UID is the
// same for every download of the sale, so importing it again updates the entry.
func SaleCalendar(s shop.Sale, pageURL string, stamp time.Time) []byte {
	const ical = "20060102T150405Z"
	var b strings.Builder
	line := func(name, value string) { b.WriteString(foldICS(name + ":" + value)) }
	line("BEGIN", "VCALENDAR")
	line("VERSION", "2.0")
	line("PRODID", "-//flashsale//flash sale reminder//EN")
	line("CALSCALE", "GREGORIAN")
	line("METHOD", "PUBLISH")
	line("BEGIN", "VEVENT")
	line("UID", "sale-"+idString(s.ID)+"@flashsale")
	line("DTSTAMP", stamp.UTC().Format(ical))
	line("DTSTART", s.StartsAt.UTC().Format(ical))
	line("DTEND", s.EndsAt.UTC().Format(ical))
	line("SUMMARY", escapeICSText(s.Name))
	if s.Description != "" {
		line("DESCRIPTION", escapeICSText(s.Description))
	}
	line("URL", pageURL)
	line("BEGIN", "VALARM")
	line("ACTION", "DISPLAY")
	line("DESCRIPTION", escapeICSText(s.Name))
	line("TRIGGER", "-PT5M")
	line("END", "VALARM")
	line("END", "VEVENT")
	line("END", "VCALENDAR")
	return []byte(b.String())
}

// escapeICSText escapes a TEXT value (RFC 5545 3.3.11): backslash, semicolon, comma and newline.
func escapeICSText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.NewReplacer(`\`, `\\`, ";", `\;`, ",", `\,`, "\n", `\n`, "\r", `\n`).Replace(s)
}

// foldICS ends a content line with CRLF, folded (RFC 5545 3.1) so that no line is longer than 75
// octets: each continuation begins with one space; a UTF-8 character is never split.
func foldICS(l string) string {
	var b strings.Builder
	limit := 75
	for len(l) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(l[cut]) {
			cut--
		}
		b.WriteString(l[:cut])
		b.WriteString("\r\n ")
		l = l[cut:]
		limit = 74 // the leading space counts
	}
	b.WriteString(l)
	b.WriteString("\r\n")
	return b.String()
}
