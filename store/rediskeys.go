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

// A sharded sale (K > 1 stock shards) keeps K copies of the sale's key set, each under its own
// hash tag, so each lands on its own Redis Cluster slot: shard 0 is {sale:S} (a sale of K = 1 is
// exactly the unsharded layout), shard k > 0 is {sale:S:k}. Every shard holds a part of every
// item's stock, its own meta (the same fields; its own reservation counter), buyers, in-flight
// register, tokens and tombstones. A shopper belongs to one shard (ShardOf), so every check of
// one shopper (one per shopper in the sale, one attempt per token) is still one script in one
// slot.

// shardTag is the hash tag of one shard of a sale.
func shardTag(saleID int64, shard int) string {
	if shard == 0 {
		return saleTag(saleID)
	}
	return "{sale:" + strconv.FormatInt(saleID, 10) + ":" + strconv.Itoa(shard) + "}"
}

// ShardTag is the hash tag of shard k of a sale ({sale:S} for shard 0, {sale:S:k} otherwise).
func ShardTag(saleID int64, shard int) string { return shardTag(saleID, shard) }

// MetaKeyOf is MetaKey of one shard.
func MetaKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":meta" }

// StockKeyOf is StockKey of one shard: its part of the item's units.
func StockKeyOf(saleID int64, shard int, itemID int64) string {
	return shardTag(saleID, shard) + ":stock:" + strconv.FormatInt(itemID, 10)
}

// BuyersKeyOf is BuyersKey of one shard: the buyers pinned to it.
func BuyersKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":buyers" }

// InFlightKeyOf is InFlightKey of one shard.
func InFlightKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":inflight" }

// GoneKeyOf is GoneKey of one shard.
func GoneKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":gone" }

// XferKeyOf is the log of a shard's transfers out not yet completed (transfer id -> record).
func XferKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":xfer" }

// XferOutKeyOf is the hash of the transfer ids a shard has sent out (id -> "n:epoch:seq", kept 30
// days): a resent out of the same id answers the same and takes nothing more.
func XferOutKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":xferout" }

// XferInKeyOf is the set of transfer ids a shard has taken in (tombstones, kept 30 days).
func XferInKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":xferin" }

// TokensKeyOf is the token budget of one shard of a sale (lua/tokens.lua): block expiry (unix
// ms) -> the block's purchase tokens not used yet.
func TokensKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":tokens" }

// EntrantsKeyOf is the hash of a shard's draw entrants while its fair start's draw is open:
// shopper (as in the buyers hash) -> the order id of their entry (one entry per shopper).
func EntrantsKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":entrants" }

// DrawKeyOf is the hash of a shard's draw entries not yet decided: order id ->
// "item:user:enteredAtMillis:rank".
func DrawKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":draw" }
