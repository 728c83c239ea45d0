package store

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/flashsale/flashsale/lua"
	"github.com/flashsale/flashsale/shop"
)

// "My orders" lists a shopper's QUEUED orders (acknowledged, not yet written by the writer) from
// Redis, which knows them: the reserve script records the shopper in the sale's buyers hash
// (member -> order id) and the reservation in its in-flight hash (order id -> item:user:ms:seq,
// ":c" once claimed), both under the shard's hash tag.

// heldScript (lua/held.lua) answers, per member, the order id it holds in the buyers hash that is
// still in flight; read-only, so Redis runs it while it refuses writes.
var heldScript = redis.NewScript(lua.Held)

// HeldLookup says where one shopper's reservations in one sale are: the shard of the sale the
// shopper is pinned to (ShardOf; 0 for a sale of one shard) and the names the shopper holds a
// unit under in its buyers hash (BuyerMember: the user id under the per-sale limit, "item:user"
// for each item under per-item).
type HeldLookup struct {
	SaleID  int64
	Shard   int
	Members []string
}

// HeldInFlight returns, per lookup, the reservations its members hold that are still in flight
// (not yet written and settled by the writer), each with the shard it was found in. It costs one
// read-only script call per lookup, all sent in one pipeline: one round trip to each Redis node
// (plus one to load the script where Redis lost it). errs[i] is lookup i's failure (a node that
// does not answer): what it holds is then unknown, while the other lookups still answer.
func (s *Stock) HeldInFlight(ctx context.Context, lookups []HeldLookup) (held [][]InFlightEntry, errs []error) {
	r := heldRead{s: s, lookups: lookups, held: make([][]InFlightEntry, len(lookups)), errs: make([]error, len(lookups))}
	if len(lookups) == 0 {
		return r.held, r.errs
	}
	all := make([]int, len(lookups))
	for i := range all {
		all[i] = i
	}
	noScript := r.take(all, r.send(ctx, all))
	if len(noScript) > 0 {
		// A Redis that lost its script cache (a restart, a failover) or a node that never ran it:
		// load it (on every master of a cluster) and send those again.
		if err := heldScript.Load(ctx, s.rdb).Err(); err != nil {
			for _, i := range noScript {
				r.errs[i] = fmt.Errorf("held in flight(sale %d): load the script: %w", lookups[i].SaleID, err)
			}
			return r.held, r.errs
		}
		for _, i := range r.take(noScript, r.send(ctx, noScript)) {
			r.errs[i] = fmt.Errorf("held in flight(sale %d, shard %d): NOSCRIPT after loading the script", lookups[i].SaleID, lookups[i].Shard)
		}
	}
	return r.held, r.errs
}

// heldRead is one HeldInFlight call: its lookups and, per lookup, the answer or the failure.
type heldRead struct {
	s       *Stock
	lookups []HeldLookup
	held    [][]InFlightEntry
	errs    []error
}

// send runs the script for the lookups numbered idx, in one pipeline.
func (r *heldRead) send(ctx context.Context, idx []int) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(idx))
	_, _ = r.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range idx {
			l := r.lookups[i]
			args := make([]any, len(l.Members))
			for k, m := range l.Members {
				args[k] = m
			}
			cmds[j] = heldScript.EvalSha(ctx, p, []string{BuyersKeyOf(l.SaleID, l.Shard), InFlightKeyOf(l.SaleID, l.Shard)}, args...)
		}
		return nil
	}) // each command's own error is read below
	return cmds
}

// take takes the answers in and returns the lookups that met a Redis without the script.
func (r *heldRead) take(idx []int, cmds []*redis.Cmd) (noScript []int) {
	for j, i := range idx {
		vals, err := cmds[j].StringSlice()
		switch {
		case err != nil && redis.HasErrorPrefix(err, "NOSCRIPT"):
			noScript = append(noScript, i)
			continue
		case err != nil:
			r.errs[i] = fmt.Errorf("held in flight(sale %d, shard %d): %w", r.lookups[i].SaleID, r.lookups[i].Shard, err)
			continue
		}
		r.errs[i] = nil
		r.held[i] = r.held[i][:0]
		for k := 0; k+1 < len(vals); k += 2 {
			if e, ok := parseInFlight(vals[k], vals[k+1]); ok {
				e.Shard = r.lookups[i].Shard
				r.held[i] = append(r.held[i], e)
			}
		}
	}
	return noScript
}

// SalesOpenSince lists, with their items (id, name, price), the sales that may hold a
// reservation not yet written: those ending after endedAfter and starting before startsBefore,
// by id, every one of them (read 500 at a time).
func (d *DB) SalesOpenSince(ctx context.Context, endedAfter, startsBefore time.Time) ([]shop.Sale, error) {
	var out []shop.Sale
	var after int64
	for {
		var page []saleRow
		err := d.g.WithContext(ctx).
			Select("id", "name", "starts_at", "ends_at", "purchase_limit", "currency", "stock_shards").
			Preload("Items", func(db *gorm.DB) *gorm.DB {
				return db.Select("id", "sale_id", "position", "name", "price_cents").Order("position")
			}).
			Where("ends_at > ? AND starts_at < ? AND id > ?", endedAfter, startsBefore, after).
			Order("id").Limit(500).Find(&page).Error
		if err != nil {
			return nil, fmt.Errorf("sales open since %s: %w", endedAfter.Format(time.RFC3339), err)
		}
		out = append(out, salesOf(page)...)
		if len(page) < 500 {
			return out, nil
		}
		after = page[len(page)-1].ID
	}
}
