// Command flashsale serves a flash sale: cacheable pages, a purchase path that refuses most of a
// crowd cheaply, reserves winners atomically in Redis, hands them durably to NATS JetStream and
// writes them to Postgres in batches. The program itself lives in internal/app.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flashsale/flashsale/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.Run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "flashsale:", err)
		os.Exit(1)
	}
}
