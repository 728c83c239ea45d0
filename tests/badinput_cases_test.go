package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/handlers"
	"github.com/flashsale/flashsale/services/auth"
)

// invalidCase is a request refused with 400 INVALID_INPUT.
func invalidCase(method, path, auth, body, name string) badCase {
	return badCase{name: name, method: method, path: path, auth: auth, body: body, status: 400, code: "INVALID_INPUT"}
}

// bodyCases: bodies that are not one strict JSON object of the known fields, on every route
// that takes one.
func (f *badFixture) bodyCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	invalid := func(method, path, auth, body, name string) { add(invalidCase(method, path, auth, body, name)) }
	big := `{"username":"` + strings.Repeat("a", 70<<10) + `","password":"12345678"}`
	malformed := map[string]string{
		"empty body":         "",
		"whitespace body":    " \n\t ",
		"truncated":          `{"username":`,
		"not JSON":           `username=alice&password=x`,
		"array":              `[]`,
		"string":             `"hello"`,
		"number":             `42`,
		"two objects":        `{} {}`,
		"trailing garbage":   `{}x`,
		"single quotes":      `{'username':'abc'}`,
		"oversized (>64KiB)": big,
		"control character":  "{\"username\":\"a\x01b\"}",
	}
	bodyRoutes := []struct{ method, path, auth, good string }{
		{"POST", "/api/auth/register", "", `{"username":"dave","password":"12345678","captchaId":"c","answer":"test"}`},
		{"POST", "/api/auth/login", "", `{"username":"carol","password":"correct horse"}`},
		{"POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", f.sale.sale), f.shopper, `{"captchaId":"abc","answer":"test"}`},
		{"POST", "/api/admin/sales", f.merchant, saleBody(nil)},
	}
	for _, r := range bodyRoutes {
		for name, body := range malformed {
			invalid(r.method, r.path, r.auth, body, name)
		}
		// unknown fields, and the known ones with the wrong types
		var good map[string]any
		if err := json.Unmarshal([]byte(r.good), &good); err != nil {
			t.Fatal(err)
		}
		good["role"] = auth.RoleMerchant
		invalid(r.method, r.path, r.auth, mustJSON(t, good), "unknown field role")
		delete(good, "role")
		for k := range good {
			wrong := map[string]any{}
			for k2, v := range good {
				wrong[k2] = v
			}
			wrong[k] = 12345
			if k == "name" || k == "startsAt" || k == "endsAt" || k == "username" || k == "password" || k == "captchaId" || k == "answer" {
				invalid(r.method, r.path, r.auth, mustJSON(t, wrong), "field "+k+" a number")
			}
			wrong[k] = map[string]any{"x": 1}
			invalid(r.method, r.path, r.auth, mustJSON(t, wrong), "field "+k+" an object")
		}
	}
	for name, body := range malformed {
		if strings.TrimSpace(body) == "" {
			continue // the captcha body is optional
		}
		invalid("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", f.sale.sale), f.shopper, body, name)
	}
	invalid("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", f.sale.sale), f.shopper, `{"answer":"test"}`, "captcha unknown field")

	return cases
}

// registrationCases: invalid usernames and passwords, a taken username, unsolved captchas.
func (f *badFixture) registrationCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	invalid := func(method, path, auth, body, name string) { add(invalidCase(method, path, auth, body, name)) }
	for _, u := range []string{"", "ab", strings.Repeat("a", 33), "a b", "ali/ce", "al!ce", "émile", "<script>", "a\tb", "ali\u0000ce"} {
		invalid("POST", "/api/auth/register", "", mustJSON(t, map[string]string{"username": u, "password": "12345678"}), "username "+u)
	}
	for _, p := range []string{"", "short", "1234567", strings.Repeat("p", 73)} {
		invalid("POST", "/api/auth/register", "", mustJSON(t, map[string]string{"username": "erin", "password": p}), fmt.Sprintf("password of %d bytes", len(p)))
	}
	add(badCase{name: "username taken", method: "POST", path: "/api/auth/register", body: `{"username":"carol","password":"another one","captchaId":"c","answer":"test"}`, status: 409, code: "USERNAME_TAKEN"})
	add(badCase{name: "username taken, other case", method: "POST", path: "/api/auth/register", body: `{"username":"CaRoL","password":"another one","captchaId":"c","answer":"test"}`, status: 409, code: "USERNAME_TAKEN"})
	for name, body := range map[string]string{
		"no captcha":         `{"username":"heidi","password":"12345678"}`,
		"wrong answer":       `{"username":"heidi","password":"12345678","captchaId":"c","answer":"nope"}`,
		"empty captcha id":   `{"username":"heidi","password":"12345678","captchaId":"","answer":"test"}`,
		"overlong captchaId": mustJSON(t, map[string]string{"username": "heidi", "password": "12345678", "captchaId": strings.Repeat("c", 129), "answer": "test"}),
	} {
		add(badCase{name: "register " + name, method: "POST", path: "/api/auth/register", body: body, status: 403, code: "CAPTCHA_FAILED"})
	}

	return cases
}

// loginCases: wrong credentials are 401, whatever is wrong with them.
func (f *badFixture) loginCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	for _, cr := range []struct{ user, pass string }{
		{"carol", "wrong password"}, {"carol", ""}, {"nobody", "correct horse"}, {"", ""}, {"CAROL", "wrong password"},
		{strings.Repeat("c", 65), "correct horse"}, {"carol", strings.Repeat("p", 73)}, {"carol'--", "x"}, {"a b", "12345678"},
	} {
		add(badCase{name: "login " + cr.user, method: "POST", path: "/api/auth/login", body: mustJSON(t, map[string]string{"username": cr.user, "password": cr.pass}),
			status: 401, code: "INVALID_CREDENTIALS"})
	}

	return cases
}

// saleCreationCases: bad times, no items, bad prices, quantities and names.
func (f *badFixture) saleCreationCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	invalid := func(method, path, auth, body, name string) { add(invalidCase(method, path, auth, body, name)) }
	now := time.Now().UTC()
	ts := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	manyItems := make([]any, 51)
	for i := range manyItems {
		manyItems[i] = map[string]any{"name": fmt.Sprintf("item %d", i), "priceCents": 100, "quantity": 1}
	}
	item := func(k string, v any) func(map[string]any) {
		return func(m map[string]any) { m["items"].([]any)[0].(map[string]any)[k] = v }
	}
	field := func(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
	drop := func(k string) func(map[string]any) { return func(m map[string]any) { delete(m, k) } }
	for name, edit := range map[string]func(map[string]any){
		"startsAt not a time":        field("startsAt", "tomorrow"),
		"startsAt without zone":      field("startsAt", "2030-01-01T10:00:00"),
		"startsAt with a space":      field("startsAt", now.Format("2006-01-02 15:04:05Z07:00")),
		"startsAt empty":             field("startsAt", ""),
		"startsAt missing":           drop("startsAt"),
		"endsAt missing":             drop("endsAt"),
		"endsAt month 13":            field("endsAt", "2030-13-01T10:00:00Z"),
		"endsAt before startsAt":     func(m map[string]any) { m["startsAt"], m["endsAt"] = ts(2*time.Hour), ts(time.Hour) },
		"endsAt equals startsAt":     func(m map[string]any) { m["startsAt"], m["endsAt"] = ts(time.Hour), ts(time.Hour) },
		"ended in the past":          func(m map[string]any) { m["startsAt"], m["endsAt"] = ts(-2*time.Hour), ts(-time.Hour) },
		"longer than 30 days":        func(m map[string]any) { m["startsAt"], m["endsAt"] = ts(time.Hour), ts(31*24*time.Hour) },
		"no items":                   field("items", []any{}),
		"items null":                 field("items", nil),
		"items missing":              drop("items"),
		"items an object":            field("items", map[string]any{"name": "x"}),
		"too many items":             field("items", manyItems),
		"negative price":             item("priceCents", -1),
		"price too high":             item("priceCents", int64(100_000_000_01)),
		"price a fraction":           item("priceCents", 9.99),
		"price a string":             item("priceCents", "100"),
		"zero quantity":              item("quantity", 0),
		"negative quantity":          item("quantity", -5),
		"quantity over a million":    item("quantity", 1_000_001),
		"huge quantity":              item("quantity", json.Number("99999999999999999999")),
		"quantity in exponent form":  item("quantity", json.Number("1e3")),
		"item unknown field sold":    item("sold", 0),
		"item name empty":            item("name", ""),
		"item name blank":            item("name", "   "),
		"item name overlong":         item("name", strings.Repeat("é", 201)),
		"sale name empty":            field("name", ""),
		"sale name overlong":         field("name", strings.Repeat("x", 201)),
		"unknown field merchantId":   field("merchantId", "9001"),
		"sale name a list":           field("name", []string{"a"}),
		"items a list of numbers":    field("items", []int{1, 2}),
		"startsAt a unix timestamp":  field("startsAt", now.Unix()),
		"endsAt RFC 1123":            field("endsAt", now.Add(time.Hour).Format(time.RFC1123)),
		"quantity a negative string": item("quantity", "-1"),
	} {
		invalid("POST", "/api/admin/sales", f.merchant, saleBody(edit), name)
	}

	return cases
}

// pathIDCases: ids not positive decimal int64 → 400; well formed but unknown → 404.
func (f *badFixture) pathIDCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	idRoutes := []struct{ method, pattern, auth, body string }{
		{"GET", "/api/flash-sales/%s", "", ""},
		{"GET", "/api/flash-sales/%s/stock", "", ""},
		{"POST", "/api/flash-sales/%s/captcha", f.shopper, ""},
		{"POST", "/api/flash-sales/%s/purchase-token", f.shopper, `{"captchaId":"abc","answer":"test"}`},
		{"POST", "/api/flash-sales/items/%s/purchase", f.shopper, ""},
		{"GET", "/api/admin/sales/%s/stock", f.merchant, ""},
	}
	for _, r := range idRoutes {
		for _, id := range []string{"-1", "0", "-0", "abc", "99999999999999999999", "9223372036854775808", "+1", "1.5", "0x1F", "1e3", "%20", "1%20", "%E2%91%A0", "١"} {
			add(badCase{name: "id " + id, method: r.method, path: fmt.Sprintf(r.pattern, id), auth: r.auth, body: r.body,
				headers: []string{"X-Purchase-Token", f.ptShopper}, status: 400, code: "INVALID_INPUT"})
		}
		for _, id := range []string{"999999999", "9223372036854775807"} {
			add(badCase{name: "unknown id " + id, method: r.method, path: fmt.Sprintf(r.pattern, id), auth: r.auth, body: r.body,
				headers: []string{"X-Purchase-Token", f.ptShopper}, status: 404, code: "NOT_FOUND"})
		}
	}
	add(badCase{name: "another f.merchant's f.sale", method: "GET", path: fmt.Sprintf("/api/admin/sales/%d/stock", f.sale.sale), auth: f.otherMerchant, status: 404, code: "NOT_FOUND"})

	return cases
}

// orderIDCases: anything but an order id this server made, or one it does not hold → 404.
func (f *badFixture) orderIDCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	for _, id := range []string{
		"abc", "-1", "0", "1", "99999999999999999999",
		"3f2b8c1e-4a5d-4e6f-9a7b-1c2d3e4f5a6b", // v4
		"00000000-0000-0000-0000-000000000000",
		"00000000-0000-8000-8000-000000000000", // v8, item 0
		"zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",
		f.unknownOrder, strings.ToUpper(f.unknownOrder), f.unknownOrder + "0", "%7B" + f.unknownOrder + "%7D",
		"urn:uuid:" + f.unknownOrder, strings.ReplaceAll(f.unknownOrder, "-", ""), "%00" + f.unknownOrder[1:],
	} {
		add(badCase{name: "order " + id, method: "GET", path: "/api/flash-sales/orders/" + id, auth: f.shopper, status: 404, code: "NOT_FOUND"})
		add(badCase{name: "pay " + id, method: "POST", path: "/api/flash-sales/orders/" + id + "/pay", auth: f.shopper, status: 404, code: "NOT_FOUND"})
	}

	return cases
}

// purchaseTokenCases: purchase tokens that do not fit the request, captchas not solved.
func (f *badFixture) purchaseTokenCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	ptPath := fmt.Sprintf("/api/flash-sales/items/%d/purchase", f.a0)
	for name, pt := range map[string]string{
		"missing": "", "garbage": "not-a-token", "another f.shopper's": f.ptOtherUser, "another f.sale's": f.ptOtherSale,
		"tampered": flipChar(f.ptShopper, 5), "truncated": f.ptShopper[:len(f.ptShopper)-1], "padded": f.ptShopper + "=",
		"a JWT": f.shopperTok,
	} {
		add(badCase{name: "purchase token " + name, method: "POST", path: ptPath, auth: f.shopper, headers: []string{"X-Purchase-Token", pt},
			status: 403, code: "INVALID_PURCHASE_TOKEN"})
	}
	add(badCase{name: "token of f.sale A on f.sale B", method: "POST", path: fmt.Sprintf("/api/flash-sales/items/%d/purchase", f.otherSale.items[0]), auth: f.shopper,
		headers: []string{"X-Purchase-Token", f.ptShopper}, status: 403, code: "INVALID_PURCHASE_TOKEN"})
	tokPath := fmt.Sprintf("/api/flash-sales/%d/purchase-token", f.sale.sale)
	for name, body := range map[string]string{
		"wrong answer":       `{"captchaId":"abc","answer":"wrong"}`,
		"empty answer":       `{"captchaId":"abc","answer":""}`,
		"no answer":          `{"captchaId":"abc"}`,
		"empty captcha id":   `{"captchaId":"","answer":"test"}`,
		"empty object":       `{}`,
		"overlong answer":    mustJSON(t, map[string]string{"captchaId": "abc", "answer": "test" + strings.Repeat(" ", 70)}),
		"overlong captchaId": mustJSON(t, map[string]string{"captchaId": strings.Repeat("c", 129), "answer": "test"}),
	} {
		add(badCase{name: "captcha " + name, method: "POST", path: tokPath, auth: f.shopper, body: body, status: 403, code: "CAPTCHA_FAILED"})
	}

	return cases
}

// identityCases: every authenticated route, every broken token, forged cookies, CSRF.
func (f *badFixture) identityCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	tokPath := fmt.Sprintf("/api/flash-sales/%d/purchase-token", f.sale.sale)
	ptPath := fmt.Sprintf("/api/flash-sales/items/%d/purchase", f.a0)
	authRoutes := []struct {
		method, path, body string
		merchant           bool
	}{
		{"GET", "/api/auth/me", "", false},
		{"POST", fmt.Sprintf("/api/flash-sales/%d/captcha", f.sale.sale), "", false},
		{"POST", tokPath, `{"captchaId":"abc","answer":"test"}`, false},
		{"POST", ptPath, "", false},
		{"GET", "/api/flash-sales/orders/" + f.unknownOrder, "", false},
		{"POST", "/api/flash-sales/orders/" + f.unknownOrder + "/pay", "", false},
		{"POST", "/api/admin/sales", saleBody(nil), true},
		{"GET", "/api/admin/sales", "", true},
		{"GET", fmt.Sprintf("/api/admin/sales/%d/stock", f.sale.sale), "", true},
	}
	for _, r := range authRoutes {
		bad := f.badShopper
		if r.merchant {
			bad = f.badMerchant
		}
		for name, auth := range bad {
			add(badCase{name: "auth " + name, method: r.method, path: r.path, auth: auth, body: r.body,
				headers: []string{"X-Purchase-Token", f.ptShopper}, status: 401, code: "UNAUTHENTICATED"})
		}
		// A forged cookie is no better than a forged header.
		add(badCase{name: "forged f.session cookie", method: r.method, path: r.path, body: r.body,
			cookies: []*http.Cookie{{Name: handlers.SessionCookie, Value: bad["forged (wrong secret)"][len("Bearer "):]}, {Name: handlers.CSRFCookie, Value: f.csrf.Value}},
			headers: []string{"X-CSRF-Token", f.csrf.Value}, status: 401, code: "UNAUTHENTICATED"})
		// Cookie sessions: every state-changing request needs the double-submit header.
		if r.method == "POST" {
			for name, cc := range map[string]struct {
				cookies []*http.Cookie
				header  string
			}{
				"no X-CSRF-Token":           {f.cookies, ""},
				"wrong X-CSRF-Token":        {f.cookies, strings.Repeat("0", len(f.csrf.Value))},
				"X-CSRF-Token, no fs_csrf":  {f.sessionOnly, f.csrf.Value},
				"X-CSRF-Token is the token": {f.cookies, f.session.Value},
			} {
				c := badCase{name: "csrf " + name, method: r.method, path: r.path, body: r.body, cookies: cc.cookies,
					headers: []string{"X-Purchase-Token", f.ptShopper}, status: 403, code: "CSRF"}
				if cc.header != "" {
					c.headers = append(c.headers, "X-CSRF-Token", cc.header)
				}
				add(c)
			}
		}
		if r.merchant {
			add(badCase{name: "shopper on admin", method: r.method, path: r.path, auth: f.shopper, body: r.body, status: 403, code: "FORBIDDEN"})
			add(badCase{name: "shopper cookie on admin", method: r.method, path: r.path, body: r.body, cookies: f.cookies,
				headers: []string{"X-CSRF-Token", f.csrf.Value}, status: 403, code: "FORBIDDEN"})
		}
	}

	return cases
}

// unknownRouteCases: routes that do not exist answer the contract's 404, whatever the method.
func (f *badFixture) unknownRouteCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	for _, r := range [][2]string{
		{"GET", "/api/nope"}, {"DELETE", "/api/admin/sales"}, {"GET", "/api/auth/register"}, {"PUT", "/api/flash-sales/orders/x/pay"},
		{"POST", "/api/flash-sales/1"}, {"GET", "/api/flash-sales/1/"}, {"POST", "/api/admin/sales/1/stock"}, {"GET", "/api/flash-sales/1%2F2"},
	} {
		add(badCase{name: "no route", method: r[0], path: r[1], auth: f.merchant, status: 404, code: "NOT_FOUND"})
	}

	return cases
}

// saleBody is a valid sale creation body, changed by edit.
func saleBody(edit func(map[string]any)) string {
	now := time.Now().UTC()
	m := map[string]any{
		"name": "bad input sale", "startsAt": now.Add(time.Hour).Format(time.RFC3339), "endsAt": now.Add(2 * time.Hour).Format(time.RFC3339),
		"items": []any{map[string]any{"name": "thing", "priceCents": 100, "quantity": 3}},
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// flipChar changes the character at i of an ASCII string.
func flipChar(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}
