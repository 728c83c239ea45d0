package store

import "testing"

func TestRedactURL(t *testing.T) {
	cases := map[string]string{
		"nats://tok@127.0.0.1:4222":                        "nats://****@127.0.0.1:4222",
		"nats://127.0.0.1:4222":                            "nats://127.0.0.1:4222",
		"nats://a@h1:4222,nats://b@h2:4222,nats://h3:4222": "nats://****@h1:4222,nats://****@h2:4222,nats://h3:4222",
		"nats://u:p@h1:4222,tls://u:p@h2:4222":             "nats://****@h1:4222,tls://****@h2:4222",
	}
	for in, want := range cases {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
