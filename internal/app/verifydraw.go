package app

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// verifyDraw is `flashsale verify-draw [-url URL] [-commitment HEX] SALE_ID`: it reads a sale's
// published draw from the shop's public API (what any shopper can read; it needs no secret and no
// database) and recomputes it (shop.CheckDraw). -commitment is one the user saved before the
// window opened: the published commitment must still be it. Exit 1 on a difference.
func verifyDraw(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("verify-draw", flag.ContinueOnError)
	fs.SetOutput(stdout)
	base := fs.String("url", "", "the shop's address (default: FLASHSALE_PUBLIC_URL, else http://127.0.0.1:8080)")
	saved := fs.String("commitment", "", "the sale's drawCommitment as you saw it before its window opened")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to spend reading the record")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("verify-draw: want one SALE_ID")
	}
	saleID, err := strconv.ParseInt(fs.Arg(0), 10, 64)
	if err != nil || saleID <= 0 {
		return fmt.Errorf("verify-draw: %q is not a sale id", fs.Arg(0))
	}
	if *base == "" {
		*base = getenv("FLASHSALE_PUBLIC_URL")
	}
	if *base == "" {
		*base = "http://127.0.0.1:8080"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	d, err := fetchDraw(ctx, strings.TrimRight(*base, "/"), saleID)
	if err != nil {
		return fmt.Errorf("verify-draw: %w", err)
	}
	var bad []string
	if *saved != "" && !strings.EqualFold(*saved, d.Commitment) {
		bad = append(bad, fmt.Sprintf("the commitment published now is %s, not the %s you saved", d.Commitment, *saved))
	}
	bad = append(bad, shop.CheckDraw(d)...)
	won := 0
	for _, e := range d.Entries {
		if e.Won {
			won++
		}
	}
	fmt.Fprintf(stdout, "sale %d: commitment %s, seed %s\n%d entries, %d won, %d item(s)\n", saleID, d.Commitment, d.Seed, len(d.Entries), won, len(d.Items))
	if len(bad) > 0 {
		for _, b := range bad {
			fmt.Fprintln(stdout, "DIFFERENCE:", b)
		}
		return fmt.Errorf("verify-draw: the draw of sale %d does not match its seed and record (%d difference(s))", saleID, len(bad))
	}
	fmt.Fprintln(stdout, "OK: the seed is the one committed to, and every rank and outcome follows from it")
	return nil
}

// drawPage is one page of the public draw record.
type drawPage struct {
	Decided    bool   `json:"decided"`
	Commitment string `json:"commitment"`
	Seed       string `json:"seed"`
	Items      []struct {
		ItemID string `json:"itemId"`
		Units  int    `json:"units"`
	} `json:"items"`
	Entries []struct {
		OrderID string `json:"orderId"`
		ItemID  string `json:"itemId"`
		Rank    *int64 `json:"rank"`
		Outcome string `json:"outcome"`
	} `json:"entries"`
	Next string `json:"next"`
}

// fetchDraw reads every page of a sale's public draw record.
func fetchDraw(ctx context.Context, base string, saleID int64) (shop.PublishedDraw, error) {
	var d shop.PublishedDraw
	cursor := ""
	for page := 0; ; page++ {
		u := fmt.Sprintf("%s/api/flash-sales/%d/draw", base, saleID)
		if cursor != "" {
			u += "?cursor=" + url.QueryEscape(cursor)
		}
		var p drawPage
		if err := getJSON(ctx, u, &p); err != nil {
			return d, err
		}
		if !p.Decided {
			return d, fmt.Errorf("the draw of sale %d is not decided yet: nothing to check before its seed is revealed", saleID)
		}
		if page == 0 {
			d.Commitment, d.Seed = p.Commitment, p.Seed
			for _, it := range p.Items {
				id, _ := strconv.ParseInt(it.ItemID, 10, 64)
				d.Items = append(d.Items, shop.DrawItem{ItemID: id, Units: it.Units})
			}
		}
		for _, e := range p.Entries {
			id, _ := strconv.ParseInt(e.ItemID, 10, 64)
			pe := shop.PublishedEntry{OrderID: e.OrderID, ItemID: id, Won: e.Outcome == "WON"}
			if e.Rank != nil {
				pe.Rank = *e.Rank
			}
			d.Entries = append(d.Entries, pe)
		}
		if p.Next == "" {
			return d, nil
		}
		cursor = p.Next
	}
}

func getJSON(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d: %s", u, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, out)
}
