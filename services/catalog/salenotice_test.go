package catalog

import (
	"slices"
	"testing"
)

// A sale-change notice names the sale's items; a receiver reads them, skipping what is not an id.
func TestItemsOfNotice(t *testing.T) {
	for in, want := range map[string][]int64{
		"":            nil,
		"7":           {7},
		"7,8,9":       {7, 8, 9},
		"7,x,-1,0,,9": {7, 9},
		"changed":     nil, // an older instance's notice: the cached row's items are dropped still
	} {
		if got := itemsOfNotice([]byte(in)); !slices.Equal(got, want) {
			t.Errorf("itemsOfNotice(%q) = %v, want %v", in, got, want)
		}
	}
}
