package views

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Every word of the merchant's server-rendered pages exists in both languages, and the Chinese
// is not a copy of the English.
func TestAdminMessagesComplete(t *testing.T) {
	en, zh := reflect.ValueOf(enAdmin), reflect.ValueOf(zhAdmin)
	typ := en.Type()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		e, z := en.Field(i), zh.Field(i)
		switch e.Kind() {
		case reflect.String:
			if e.String() == "" || z.String() == "" {
				t.Errorf("%s: en %q, zh %q; want both set", name, e.String(), z.String())
			}
			if e.String() == z.String() {
				t.Errorf("%s: the Chinese is the English (%q)", name, e.String())
			}
		case reflect.Func:
			if e.IsNil() || z.IsNil() {
				t.Errorf("%s: a function is missing (en %v, zh %v)", name, !e.IsNil(), !z.IsNil())
			}
		case reflect.Map:
			for _, k := range e.MapKeys() {
				if zv := z.MapIndex(k); !zv.IsValid() || zv.String() == "" || zv.String() == e.MapIndex(k).String() {
					t.Errorf("%s[%v]: no Chinese of %q", name, k, e.MapIndex(k).String())
				}
			}
		default:
			t.Errorf("%s: kind %s not checked", name, e.Kind())
		}
	}
	if got, want := zhAdmin.LiveTitle("7"), "实时看板 · 活动 7"; got != want {
		t.Errorf("zh LiveTitle(7) = %q, want %q", got, want)
	}
}

// adminLatin are the Latin words a Chinese merchant page may hold: currency codes, the CSV file
// format, the https:// of an image address's placeholder and SHA-256 (the draw's commitment).
var adminLatin = []string{"CNY", "USD", "EUR", "CSV", "https", "SHA"}

// The merchant's pages in each language: <html lang>, the title, the heading, the switch, and on
// the Chinese page no English word left (the markup's; the script's words are checked in a
// browser by TestE2EAdminChinese).
func TestAdminPagesInBothLanguages(t *testing.T) {
	pages := []struct {
		name  string
		title map[Lang]string
		h1    map[Lang]string
	}{
		{"admin", map[Lang]string{English: "Merchant admin · flashsale", Chinese: "商家后台 · flashsale"},
			map[Lang]string{English: "Merchant admin", Chinese: "商家后台"}},
		{"live", map[Lang]string{English: "Live view · sale 42 · flashsale", Chinese: "实时看板 · 活动 42 · flashsale"},
			map[Lang]string{English: "Sale 42", Chinese: "活动 42"}},
		{"orders", map[Lang]string{English: "Orders · sale 42 · flashsale", Chinese: "订单 · 活动 42 · flashsale"},
			map[Lang]string{English: "Orders: sale 42", Chinese: "订单：活动 42"}},
	}
	for _, p := range pages {
		for _, lang := range Langs {
			t.Run(p.name+"/"+string(lang), func(t *testing.T) {
				c := AdminPage(Admin{})
				switch p.name {
				case "live":
					c = AdminLivePage(AdminSale{ID: "42"})
				case "orders":
					c = AdminOrdersPage(AdminSale{ID: "42"})
				}
				doc := renderIn(t, c, Locale{Lang: lang, Path: "/somewhere"})
				if got, want := doc.Find("html").AttrOr("lang", ""), lang.Tag(); got != want {
					t.Errorf("<html lang> = %q, want %q", got, want)
				}
				if got, want := doc.Find("title").Text(), p.title[lang]; got != want {
					t.Errorf("title = %q, want %q", got, want)
				}
				if got, want := strings.Join(strings.Fields(doc.Find("h1").Text()), " "), p.h1[lang]; got != want {
					t.Errorf("h1 = %q, want %q", got, want)
				}
				if lang == Chinese {
					words := slices.DeleteFunc(untranslated(doc), func(w string) bool { return slices.Contains(adminLatin, w) })
					if len(words) > 0 {
						t.Errorf("English words on the Chinese page: %q", words)
					}
				}
				checkLangSwitch(t, doc, lang, "/somewhere")
			})
		}
	}
}
