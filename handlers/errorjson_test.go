package handlers

import (
	"encoding/json"
	"testing"
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
