package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

// errorJSON writes, byte for byte, what encoding/json writes for the same body: for plain
// messages on its own, for the rest through the library.
func TestErrorJSONIsEncodingJSON(t *testing.T) {
	cases := []errorBody{
		{Error: "SOLD_OUT", Message: "sold out: every unit has been taken"},
		{Error: "ALREADY_PURCHASED", Message: "you already hold an order in this sale", OrderID: "0b6f1c2e-6d0a-4f55-9a8e-0d2b1e0f9c11"},
		{Error: "INVALID_INPUT", Message: `malformed JSON body: "x" is not a field`},
		{Error: "INVALID_INPUT", Message: `a <script> & friends`},
		{Error: "INVALID_INPUT", Message: "tab\there, newline\nthere, back\\slash"},
		{Error: "INVALID_INPUT", Message: "中文的消息 and U+2028 \u2028"},
		{Error: "INVALID_INPUT", Message: "invalid utf-8 \xff\xfe"},
		{Error: "", Message: ""},
		{Error: "X", Message: "~ the last printable, and DEL \x7f"},
	}
	for _, b := range cases {
		want, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := errorJSON(b); string(got) != string(want) {
			t.Errorf("errorJSON(%+v)\n got %s\nwant %s", b, got, want)
		}
	}
}

func FuzzErrorJSON(f *testing.F) {
	f.Add("SOLD_OUT", "sold out", "")
	f.Add("A", "<&>\"\\\x01é", "id")
	f.Fuzz(func(t *testing.T, code, msg, order string) {
		b := errorBody{Error: code, Message: msg, OrderID: order}
		want, _ := json.Marshal(b)
		if got := errorJSON(b); string(got) != string(want) {
			t.Fatalf("errorJSON(%q, %q, %q) = %s, want %s", code, msg, order, got, want)
		}
	})
}

// Error answers a prepared refusal (the crowd's, written from bytes made once) exactly as it
// answers the same refusal built anew: status, Content-Type, Retry-After and body.
func TestPreparedRefusalsAnswerAsBuilt(t *testing.T) {
	gin.SetMode(gin.TestMode)
	for e := range prepared {
		answer := func(err error) *httptest.ResponseRecorder {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodPost, "/", nil)
			Error(c, nil, err)
			return w
		}
		copied := *e // the same refusal, another pointer: not in the table
		got, want := answer(e), answer(&copied)
		if got.Code != want.Code || got.Body.String() != want.Body.String() ||
			got.Header().Get("Content-Type") != want.Header().Get("Content-Type") || got.Header().Get("Retry-After") != want.Header().Get("Retry-After") {
			t.Errorf("%s prepared: %d %q %v, built: %d %q %v", e.Code, got.Code, got.Body, got.Header(), want.Code, want.Body, want.Header())
		}
		if got.Code != statusOf[e.Code] || got.Header().Get("Content-Type") != jsonType {
			t.Errorf("%s: %d %q, want %d %q", e.Code, got.Code, got.Header().Get("Content-Type"), statusOf[e.Code], jsonType)
		}
	}
	if len(prepared) < 2 {
		t.Errorf("%d prepared refusals, want SOLD_OUT and PAUSED", len(prepared))
	}
}

// tokenJSON writes what c.JSON wrote for the purchase token's answer, byte for byte.
func TestTokenJSONIsEncodingJSON(t *testing.T) {
	at := time.Date(2026, 12, 7, 19, 40, 1, 123456789, time.FixedZone("x", 3600))
	for _, tok := range []string{"AAAAAAAAAAEAAAAAAAAAAgAAAZsBAgMEBQYHCAkKCwwNDg8Q.abcdefghijklmnopqrstuv", "", `odd "<&>" token`} {
		want, _ := json.Marshal(gin.H{"purchaseToken": tok, "expiresAt": at.UTC().Format(time.RFC3339Nano)})
		if got := tokenJSON(tok, at); string(got) != string(want) {
			t.Errorf("tokenJSON(%q)\n got %s\nwant %s", tok, got, want)
		}
	}
}
