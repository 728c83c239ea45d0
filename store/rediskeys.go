package store

import (
	"strconv"

	"github.com/flashsale/flashsale/shop"
)

func saleTag(saleID int64) string { return "{sale:" + strconv.FormatInt(saleID, 10) + "}" }

// MetaKey is the hash of a sale's Redis state: seq (the reservation counter), epoch (of the last
// rebuild), limit, starts, ends, loadedAt, lost, tokfloor, fence. Missing: the sale is not loaded.
func MetaKey(saleID int64) string { return saleTag(saleID) + ":meta" }

// StockKey is the Redis key holding an item's remaining units.
func StockKey(saleID, itemID int64) string {
	return saleTag(saleID) + ":stock:" + strconv.FormatInt(itemID, 10)
}

// BuyersKey is the Redis hash of a sale's shoppers holding a unit (member -> order id).
func BuyersKey(saleID int64) string { return saleTag(saleID) + ":buyers" }

// InFlightKey is the Redis hash of a sale's reservations not yet written to Postgres.
func InFlightKey(saleID int64) string { return saleTag(saleID) + ":inflight" }

// GoneKey is the Redis set of a sale's order ids whose unit went back (tombstones).
func GoneKey(saleID int64) string { return saleTag(saleID) + ":gone" }

func tokenKey(saleID int64, shard int, nonce string) string {
	return shardTag(saleID, shard) + ":tok:" + nonce
}

// BuyerMember is how a shopper is named in a sale's buyers hash under a purchase limit.
func BuyerMember(limit string, itemID, userID int64) string {
	if limit == shop.LimitPerItem {
		return strconv.FormatInt(itemID, 10) + ":" + strconv.FormatInt(userID, 10)
	}
	return strconv.FormatInt(userID, 10)
}
