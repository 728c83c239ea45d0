// Command bench measures a running flashsale through its public contract only, and the
// ceilings it is judged against in the same run.
//
//	go run ./bench rush    [flags]  100,000 shoppers within 2 s for 10,000 units (defaults)
//	go run ./bench soldout [flags]  the refusal path alone, on a sold-out item
//	go run ./bench reserve [flags]  the winning path alone, on an item that never runs out
//	go run ./bench ladder  [flags]  whole shopper visits at stepped constant rates
//	go run ./bench compare old.json new.json
//	go run ./bench pairs DIR        the budget table of make bench-compare's runs in DIR
//
// The load is open-loop: arrivals follow a schedule fixed in advance, whatever the answers, and
// every latency counts from the scheduled time, so a slow server cannot hide behind a waiting
// generator. The bare-Gin and Gin+EVALSHA reference servers (ref-gin, ref-redis: subcommands
// of this same binary) are driven with the same generator, and flashsale's figures are printed
// as ratios of theirs. BENCHMARKS.md has the method and the latest figures.
//
// Layout: each scenario is one type in its own file (scenario_*.go) implementing Scenario
// (scenario.go: name, usage, its own flags, run, checks, printout), listed in scenarios(); a new
// scenario is one file and one line there. Runner (runner.go) is what they share: the server's
// API and stores, its processes, fresh shoppers, measured phases and the references; steps.go
// holds the capacity search the ladder-based ones use. The parts are internal packages: load
// (the open-loop generator, its HTTP client and the shopper flows), hist (latency histograms),
// tokens (JWT minting, token arenas), proc (the /proc process sampler), refs (the reference
// servers), target (the server's API, its stores, the invariant check) and report (phase
// reports, flat metrics, medians, compare and the tables).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/flashsale/flashsale/bench/internal/refs"
)

func main() {
	ctx, stop := signalContext()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usageText())
		return errUsage
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprintln(stdout, usageText())
		return nil
	case "compare":
		return compareMain(args, stdout, stderr)
	case "pairs":
		return pairsMain(args, stdout, stderr)
	case refs.Gin, refs.Redis:
		return refs.Serve(ctx, cmd, args, stderr)
	}
	if scenarioNamed(cmd) == nil {
		fmt.Fprintln(stderr, usageText())
		return fmt.Errorf("unknown command %q", cmd)
	}
	o, err := parseOptions(cmd, args, stderr)
	if err != nil {
		return err
	}
	rep, err := Bench(ctx, o, stdout, stderr)
	if rep != nil {
		printReport(stdout, rep)
		if o.JSON != "" {
			if werr := writeJSON(o.JSON, rep); werr != nil {
				return errors.Join(err, werr)
			}
			fmt.Fprintln(stdout, "results written to", o.JSON)
		}
	}
	if err != nil {
		return err
	}
	if !rep.OK {
		return errInvariants
	}
	return nil
}

// Bench runs a scenario with its options and returns the report; tests call it directly.
func Bench(ctx context.Context, o Options, stdout, stderr io.Writer) (*Report, error) {
	r, err := NewRunner(ctx, o, stdout, stderr)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Run(ctx)
}

// signalContext is cancelled by SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}
