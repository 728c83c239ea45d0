package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		w.Write([]byte(`{"status":"x"}`))
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	run := func(addr string, args ...string) error {
		var out strings.Builder
		return Run(context.Background(), append([]string{"healthcheck"}, args...), func(k string) string {
			if k == "FLASHSALE_ADDR" {
				return addr
			}
			// The rest of the environment does not matter: a production setting that would not
			// load (no JWT secret) must not stop the check.
			if k == "FLASHSALE_ENV" {
				return "production"
			}
			return ""
		}, &out)
	}
	for _, addr := range []string{"127.0.0.1:" + port, "0.0.0.0:" + port, ":" + port} {
		if err := run(addr); err != nil {
			t.Errorf("healthcheck of a ready instance on %s: %v", addr, err)
		}
	}
	status = http.StatusServiceUnavailable
	if err := run("127.0.0.1:" + port); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("healthcheck of an unready instance: %v, want an error naming 503", err)
	}
	srv.Close()
	if err := run("127.0.0.1:"+port, "-timeout", "500ms"); err == nil {
		t.Error("healthcheck with nothing listening: no error")
	}
	if err := run("no-port"); err == nil {
		t.Error("healthcheck of a malformed FLASHSALE_ADDR: no error")
	}
}
