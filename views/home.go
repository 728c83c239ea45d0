package views

import "strconv"

// moreItemsText is the line under a sale card's first items: "and 1 more item", "and 3 more items".
func moreItemsText(n int) string {
	if n == 1 {
		return "and 1 more item"
	}
	return "and " + strconv.Itoa(n) + " more items"
}
