package shop

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// fairDraw decides a draw of n entries of one item with the given units, as the shop does.
func fairDraw(seed []byte, n, units int) PublishedDraw {
	d := PublishedDraw{Commitment: DrawCommitment(seed), Seed: hex.EncodeToString(seed), Items: []DrawItem{{ItemID: 7, Units: units}}}
	for i := range n {
		d.Entries = append(d.Entries, PublishedEntry{OrderID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), ItemID: 7})
	}
	sort.Slice(d.Entries, func(i, j int) bool {
		return bytes.Compare(DrawKey(seed, d.Entries[i].OrderID), DrawKey(seed, d.Entries[j].OrderID)) < 0
	})
	for i := range d.Entries {
		d.Entries[i].Rank, d.Entries[i].Won = int64(i+1), i < units
	}
	return d
}

func TestCheckDraw(t *testing.T) {
	seed := bytes.Repeat([]byte{0x5a}, DrawSeedSize)
	if bad := CheckDraw(fairDraw(seed, 20, 5)); len(bad) != 0 {
		t.Fatalf("a fair draw: %v, want no difference", bad)
	}
	if bad := CheckDraw(fairDraw(seed, 3, 5)); len(bad) != 0 {
		t.Fatalf("fewer entries than units, all won: %v", bad)
	}
	cases := []struct {
		name   string
		tamper func(*PublishedDraw)
		want   string
	}{
		{"another seed than the committed one", func(d *PublishedDraw) { d.Seed = strings.Repeat("00", DrawSeedSize) }, "not the commitment"},
		{"a seed that is not hex", func(d *PublishedDraw) { d.Seed = "zz" }, "not 32 bytes"},
		{"a loser marked won", func(d *PublishedDraw) { d.Entries[7].Won = true }, "past the units"},
		{"a winner marked lost", func(d *PublishedDraw) { d.Entries[0].Won = false }, "within the units"},
		{"two ranks swapped", func(d *PublishedDraw) {
			d.Entries[1].Rank, d.Entries[8].Rank = d.Entries[8].Rank, d.Entries[1].Rank
		}, "its draw key places it"},
		{"fewer units said than given", func(d *PublishedDraw) { d.Items[0].Units = 4 }, "past the units"},
		{"an unranked entry that won", func(d *PublishedDraw) {
			d.Entries = append(d.Entries, PublishedEntry{OrderID: "00000000-0000-4000-8000-999999999999", ItemID: 7, Won: true})
		}, "not ranked but won"},
		{"an entry listed twice", func(d *PublishedDraw) { d.Entries = append(d.Entries, d.Entries[3]) }, "listed twice"},
		{"an entry of an item not in the draw", func(d *PublishedDraw) { d.Entries[12].ItemID = 8 }, "does not list"},
	}
	for _, tc := range cases {
		d := fairDraw(seed, 20, 5)
		tc.tamper(&d)
		bad := CheckDraw(d)
		if !strings.Contains(strings.Join(bad, "\n"), tc.want) {
			t.Errorf("%s: %v, want a difference saying %q", tc.name, bad, tc.want)
		}
	}
}

// The rule's own numbers, as the contract states them: SHA-256 of the seed, HMAC-SHA256 under it.
func TestDrawKeyAndCommitment(t *testing.T) {
	seed := make([]byte, DrawSeedSize) // 32 zero bytes
	if got := DrawCommitment(seed); got != "66687aadf862bd776c8fc18b8e9f8e20089714856ee233b3902a591d0d5f2925" {
		t.Errorf("commitment of 32 zero bytes: %s", got)
	}
	// HMAC-SHA256(key = 32 zero bytes, message "abc"), as Python's hmac module computes it
	if got := hex.EncodeToString(DrawKey(seed, "abc")); got != "fd7adb152c05ef80dccf50a1fa4c05d5a3ec6da95575fc312ae7c5d091836351" {
		t.Errorf("draw key: %s", got)
	}
	if a, b := NewDrawSeed(), NewDrawSeed(); len(a) != DrawSeedSize || bytes.Equal(a, b) {
		t.Errorf("two seeds drawn: %x and %x", a, b)
	}
}
