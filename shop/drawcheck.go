package shop

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"sort"
)

// PublishedDraw is a decided draw as the shop publishes it (GET /api/flash-sales/{saleId}/draw):
// enough for anyone to recompute it.
type PublishedDraw struct {
	Commitment string // lowercase hex SHA-256 of the seed, published before the window opened
	Seed       string // the seed, lowercase hex, revealed once the draw was decided
	Items      []DrawItem
	Entries    []PublishedEntry
}

// PublishedEntry is one entry of a published draw.
type PublishedEntry struct {
	OrderID string
	ItemID  int64
	Rank    int64 // its place among its item's ranked entries (1: the best); 0: not ranked
	Won     bool
}

// CheckDraw recomputes a published draw and returns every difference it finds (none: the draw is
// what its seed, committed to before the window, and its entries make it). It checks that the seed
// is the committed one; that within each item the ranked entries are in the order of their draw
// keys (DrawKey), ranked 1, 2, … without a gap; that exactly the best Units of them won; and that
// no unranked entry won. It cannot check which entries exist, nor that an unranked entry was rightly
// left out (a shopper's second entry): those are the shop's word, which each shopper can check for
// their own entry.
func CheckDraw(d PublishedDraw) []string {
	var bad []string
	seed, err := hex.DecodeString(d.Seed)
	switch {
	case err != nil || len(seed) != DrawSeedSize:
		return []string{fmt.Sprintf("the seed %q is not %d bytes in hex", d.Seed, DrawSeedSize)}
	case DrawCommitment(seed) != d.Commitment:
		return []string{fmt.Sprintf("the seed's SHA-256 is %s, not the commitment %s", DrawCommitment(seed), d.Commitment)}
	}
	units := map[int64]int{}
	for _, it := range d.Items {
		units[it.ItemID] = it.Units
	}
	type ranked struct {
		PublishedEntry
		key []byte
	}
	byItem := map[int64][]ranked{}
	seen := map[string]bool{}
	for _, e := range d.Entries {
		if seen[e.OrderID] {
			bad = append(bad, fmt.Sprintf("entry %s is listed twice", e.OrderID))
			continue
		}
		seen[e.OrderID] = true
		if _, ok := units[e.ItemID]; !ok {
			bad = append(bad, fmt.Sprintf("entry %s is of item %d, which the draw does not list", e.OrderID, e.ItemID))
			continue
		}
		if e.Rank <= 0 {
			if e.Won {
				bad = append(bad, fmt.Sprintf("entry %s was not ranked but won", e.OrderID))
			}
			continue
		}
		byItem[e.ItemID] = append(byItem[e.ItemID], ranked{e, DrawKey(seed, e.OrderID)})
	}
	for _, it := range d.Items {
		es := byItem[it.ItemID]
		sort.Slice(es, func(i, j int) bool { return bytes.Compare(es[i].key, es[j].key) < 0 })
		for i, e := range es {
			if e.Rank != int64(i+1) {
				bad = append(bad, fmt.Sprintf("item %d: entry %s is ranked %d, its draw key places it %d", it.ItemID, e.OrderID, e.Rank, i+1))
			}
			if want := i < it.Units; e.Won != want {
				bad = append(bad, fmt.Sprintf("item %d: entry %s in place %d of %d units %s", it.ItemID, e.OrderID, i+1, it.Units,
					map[bool]string{true: "won, but its place is past the units", false: "did not win, but its place is within the units"}[e.Won]))
			}
		}
	}
	return bad
}
