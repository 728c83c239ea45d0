// Package services holds the flash-sale rules: who may buy what and when, how a reservation
// becomes an order, and what the merchant sees. It knows nothing of HTTP or HTML.
package services

import "github.com/flashsale/flashsale/shop"

// errBadCursor answers a cursor this server did not give out.
var errBadCursor = shop.Errorf(shop.CodeInvalidInput, "cursor is not one this server gave out; start from the first page without it")

// cursorFrom decodes a client's cursor with decode: nil for "" (the first page), errBadCursor for
// one this server did not give out.
func cursorFrom[C any](cursor string, decode func(string) (C, bool)) (*C, error) {
	if cursor == "" {
		return nil, nil
	}
	c, ok := decode(cursor)
	if !ok {
		return nil, errBadCursor
	}
	return &c, nil
}
