package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/views"
)

// The language of the shopper pages (docs/api.md, "Languages"):
//   - ?lang=zh or ?lang=en names it: one URL per language, the same for every visitor, and the
//     answer sets the fs_lang cookie that remembers the choice;
//   - else Accept-Language chooses (q-values respected; zh, zh-CN, zh-SG and zh-Hans are
//     Simplified Chinese, en-* English, anything else English), and the answer says
//     Vary: Accept-Language, so a cache keeps one copy per language.
//
// The HTML never depends on the cookie (a CDN that ignores cookies would mix the languages):
// the page's script finds a remembered choice that differs from the page's language and goes
// to the ?lang= URL of it (static/js/i18n.js).

// LangCookie remembers the shopper's choice of language. The script reads it, so it is not HttpOnly.
const LangCookie = "fs_lang"

const langCookieMaxAge = 365 * 24 * 3600

// acceptLanguageMaxEntries bounds the work on a hostile header.
const acceptLanguageMaxEntries = 32

// NegotiateLang picks the language of an Accept-Language header: the supported language of the
// highest q-value (the first of equal ones); English when none is acceptable.
func NegotiateLang(header string) views.Lang {
	best, bestQ := views.English, 0.0
	for i, part := range strings.Split(header, ",") {
		if i >= acceptLanguageMaxEntries {
			break
		}
		tag, params, _ := strings.Cut(part, ";")
		tag = strings.ToLower(strings.TrimSpace(tag))
		q, ok := qValue(params)
		if !ok || q <= 0 {
			continue
		}
		lang, supported := tagLang(tag)
		if supported && q > bestQ {
			best, bestQ = lang, q
		}
	}
	return best
}

// tagLang maps a language range to the page language it asks for.
func tagLang(tag string) (views.Lang, bool) {
	switch {
	case tag == "*":
		return views.English, true
	case tag == "en" || strings.HasPrefix(tag, "en-"):
		return views.English, true
	case tag == "zh", tag == "zh-cn", tag == "zh-sg", tag == "zh-my",
		tag == "zh-hans", strings.HasPrefix(tag, "zh-hans-"), strings.HasPrefix(tag, "zh-cn-"):
		return views.Chinese, true
	}
	// Traditional Chinese (zh-TW, zh-HK, zh-Hant) and every other language: not served.
	return "", false
}

// qValue reads the ";q=0.8" of a language range (1 when absent); ok is false when malformed.
func qValue(params string) (float64, bool) {
	q := 1.0
	for p := range strings.SplitSeq(params, ";") {
		k, v, found := strings.Cut(strings.TrimSpace(p), "=")
		if !found || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || f > 1 {
			return 0, false
		}
		q = f
	}
	return q, true
}

// locale decides the language of a page for this request, says how in the response's headers
// (Vary, or the fs_lang cookie) and returns the request's context carrying it.
func (p *Pages) locale(c *gin.Context) views.Locale {
	query := c.Request.URL.Query()
	loc := views.Locale{Path: c.Request.URL.Path, Query: query}
	if lang, ok := views.ParseLang(query.Get("lang")); ok && len(query["lang"]) == 1 {
		loc.Lang, loc.Pinned = lang, true
		if ck, err := c.Cookie(LangCookie); err != nil || ck != string(lang) {
			c.SetSameSite(http.SameSiteLaxMode)
			c.SetCookie(LangCookie, string(lang), langCookieMaxAge, "/", "", p.SecureCookie, false)
		}
	} else {
		loc.Lang = NegotiateLang(c.GetHeader("Accept-Language"))
		c.Writer.Header().Add("Vary", "Accept-Language")
	}
	delete(loc.Query, "lang")
	return loc
}
