package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// healthcheck is `flashsale healthcheck`: GET /readyz on this instance's FLASHSALE_ADDR (an
// unspecified host such as 0.0.0.0 means loopback), nil on 200, an error (exit 1) otherwise.
// The container image has no curl; its HEALTHCHECK runs this. It reads only FLASHSALE_ADDR, so
// it works whatever else the environment holds.
func healthcheck(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stdout)
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	addr := getenv("FLASHSALE_ADDR")
	if addr == "" {
		for _, v := range ConfigVars {
			if v.Name == "FLASHSALE_ADDR" {
				addr = v.Default
			}
		}
	}
	url, err := readyzURL(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %d: %s", url, resp.StatusCode, body)
	}
	fmt.Fprintf(stdout, "ready: %s\n", body)
	return nil
}

// readyzURL is the /readyz URL of a listen address: a wildcard or empty host is reached on
// loopback.
func readyzURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", errors.New("healthcheck: FLASHSALE_ADDR=" + addr + ": want host:port")
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}
