package store

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/flashsale/flashsale/lua"
	"github.com/flashsale/flashsale/shop"
)

// A fair start's draw, in both engines. In Redis, while the window is open, each shard holds its
// entrants (one entry per shopper) and its undecided entries (reserve.lua); a purchase after the
// window waits until the shard has applied the decided draw. In Postgres an entry is an order row
// ENTERED with its rank; the draw is decided in one transaction (CloseDraw) and then applied to
// each shard (ApplyDraw), both idempotent.

var (
	drawStateScript   = redis.NewScript(lua.DrawState)
	drawApplyScript   = redis.NewScript(lua.DrawApply)
	drawReleaseScript = redis.NewScript(lua.DrawRelease)
)

// DrawShard is what one shard holds of a sale's draw.
type DrawShard struct {
	Held      bool      // loaded and not marked lost (otherwise nothing else is known)
	Now       time.Time // the shard's Redis clock
	WindowEnd time.Time // zero: the sale has no draw (as this shard holds it)
	Drawn     bool      // the decided draw is applied here
	EntryLost bool      // loaded after the window opened: its entries are not all here
	Entries   []string  // the undecided entries it holds (order ids)
}

// DrawShards reads every shard's part of a sale's draw.
func (s *Stock) DrawShards(ctx context.Context, saleID int64) ([]DrawShard, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("draw state(sale %d): %w", saleID, err)
	}
	out := make([]DrawShard, k)
	for sh := range k {
		v, err := drawStateScript.Run(ctx, s.rdb, []string{MetaKeyOf(saleID, sh), DrawKeyOf(saleID, sh)}).Slice()
		if err != nil {
			return nil, fmt.Errorf("draw state(sale %d, shard %d): %w", saleID, sh, err)
		}
		if len(v) < 5 {
			return nil, fmt.Errorf("draw state(sale %d, shard %d): unexpected reply %v", saleID, sh, v)
		}
		held, _ := v[0].(int64)
		now, _ := v[1].(int64)
		fair, _ := v[2].(int64)
		drawn, _ := v[3].(int64)
		lost, _ := v[4].(int64)
		d := DrawShard{Held: held == 1, Now: time.UnixMilli(now), Drawn: drawn == 1, EntryLost: lost == 1}
		if fair > 0 {
			d.WindowEnd = time.UnixMilli(fair)
		}
		for _, x := range v[5:] {
			if id, ok := x.(string); ok {
				d.Entries = append(d.Entries, id)
			}
		}
		out[sh] = d
	}
	return out, nil
}

// Decision is a decided draw, as each shard applies it.
type Decision struct {
	Left    map[int64]int64 // item -> units left right after the draw (the whole sale's)
	Items   []int64         // the sale's items, in order
	Limit   string          // the purchase limit (names the buyers' members)
	Winners []DrawWinner
}

// DrawWinner is one entry the draw gave a unit.
type DrawWinner struct {
	OrderID        string
	ItemID, UserID int64
}

// ApplyDraw applies a decided draw to every shard that has not applied it: each gets its part of
// the units left (SplitUnits, as a load splits them) and its winners as buyers. It returns how
// many shards applied it now and how many could not (not loaded or marked lost: their load
// reads the decided draw from Postgres).
func (s *Stock) ApplyDraw(ctx context.Context, saleID int64, d Decision) (applied, unheld int, err error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return 0, 0, fmt.Errorf("apply draw(sale %d): %w", saleID, err)
	}
	winners := make([][]any, k)
	for _, w := range d.Winners {
		sh := ShardOf(w.UserID, k)
		winners[sh] = append(winners[sh], BuyerMember(d.Limit, w.ItemID, w.UserID), w.OrderID)
	}
	for sh := range k {
		keys := []string{MetaKeyOf(saleID, sh), BuyersKeyOf(saleID, sh), EntrantsKeyOf(saleID, sh), DrawKeyOf(saleID, sh)}
		args := make([]any, 0, len(d.Items)+len(winners[sh]))
		for _, it := range d.Items {
			keys = append(keys, StockKeyOf(saleID, sh, it))
			args = append(args, SplitUnits(d.Left[it], k)[sh])
		}
		args = append(args, winners[sh]...)
		n, err := drawApplyScript.Run(ctx, s.rdb, keys, args...).Int64()
		if err != nil {
			return applied, unheld, fmt.Errorf("apply draw(sale %d, shard %d): %w", saleID, sh, err)
		}
		switch n {
		case 1:
			applied++
		case 3:
			unheld++
		}
	}
	return applied, unheld, nil
}

// ReleaseEntry takes back a draw entry whose publish failed, so the draw does not wait for it;
// the purchase token (its nonce) of the attempt then answers as used.
func (s *Stock) ReleaseEntry(ctx context.Context, limit string, o shop.OrderRef, nonce string) (bool, error) {
	sh, err := s.ShardOfUser(ctx, o.SaleID, o.UserID)
	if err != nil {
		return false, err
	}
	n, err := drawReleaseScript.Run(ctx, s.rdb, []string{EntrantsKeyOf(o.SaleID, sh), DrawKeyOf(o.SaleID, sh), tokenKey(o.SaleID, sh, nonce)},
		o.OrderID, BuyerMember(limit, o.ItemID, o.UserID)).Int64()
	if err != nil {
		return false, fmt.Errorf("release entry(sale %d, order %s): %w", o.SaleID, o.OrderID, err)
	}
	return n == 1, nil
}

// NewEntry is a draw entry on its way into Postgres.
type NewEntry struct {
	ID                     string
	SaleID, ItemID, UserID int64
	EnteredAt              time.Time // Redis's clock
	Seq                    int64     // the sale's (shard's) reservation counter the entry moved
}

// InsertEntries writes draw entries as ENTERED orders (an entry already written is skipped). An
// entry of a sale whose draw has closed (it reached Postgres after the decision: only when Redis
// lost it, or its publish outlived the wait) is written NOT_SELECTED at once, so every entry
// acknowledged ends with one outcome. The sales' rows are read FOR SHARE: a draw being decided
// (CloseDraw holds its row) is waited for.
func (d *DB) InsertEntries(ctx context.Context, entries []NewEntry) (int, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	orders := make([]NewOrder, len(entries)) // laid out by columnsOf, as the writer's orders
	for i, e := range entries {
		orders[i] = NewOrder{ID: e.ID, SaleID: e.SaleID, ItemID: e.ItemID, UserID: e.UserID, Seq: e.Seq, ReservedAt: e.EnteredAt}
	}
	shIDs, shards, err := d.shardsOfOrders(ctx, orders)
	if err != nil {
		return 0, fmt.Errorf("insert entries: %w", err)
	}
	c := columnsOf(orders)
	args := []any{c.ids.literal(), c.items.literal(), c.users.literal(), c.reserved.literal(), c.seqs.literal(),
		int64Array(c.itemIDs), reasonLateEntry}
	perShard := ""
	if len(shIDs) > 0 {
		perShard = insertOrdersPerShard
		args = append(args, shIDs.literal(), shards.literal())
	}
	var n int64
	if err := d.g.WithContext(ctx).Raw(insertEntriesSQL+perShard+`
		SELECT count(*) FROM ins`, args...).Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("insert entries: %w", err)
	}
	return int(n), nil
}

// insertEntriesSQL is InsertEntries' statement: the sales' rows FOR SHARE first, then the items'
// rows in id order (the order every writer of items takes), then the rows; each item's max_seq
// rises to its entries' seqs (and each shard's, with insertOrdersPerShard after it, as for
// orders), so a Redis that lost entries is found behind Postgres as one that lost reservations.
const insertEntriesSQL = `WITH u AS (
			SELECT * FROM unnest(?::uuid[], ?::bigint[], ?::bigint[], ?::timestamptz[], ?::bigint[])
				AS u(id, item_id, user_id, entered_at, seq)
		), s AS (
			SELECT s.id, s.draw_closed_at, s.purchase_limit FROM sales s
			WHERE s.id IN (SELECT i.sale_id FROM items i WHERE i.id IN (SELECT item_id FROM u)) ORDER BY s.id FOR SHARE
		), lk AS (
			SELECT id FROM items WHERE id = ANY(?::bigint[]) AND (SELECT count(*) FROM s) >= 0 ORDER BY id FOR UPDATE
		), ins AS (
			INSERT INTO orders (id, item_id, sale_id, user_id, status, reserved_at, pay_by, seq, per_sale, unit_price_cents, draw_rank, failure)
			SELECT u.id, u.item_id, i.sale_id, u.user_id,
			       CASE WHEN s.draw_closed_at IS NULL THEN 'ENTERED' ELSE 'NOT_SELECTED' END,
			       u.entered_at, u.entered_at, u.seq, s.purchase_limit = 'per-sale', i.price_cents, 0,
			       CASE WHEN s.draw_closed_at IS NULL THEN NULL ELSE ? END
			FROM u JOIN items i ON i.id = u.item_id JOIN s ON s.id = i.sale_id
			WHERE (SELECT count(*) FROM lk) >= 0
			ON CONFLICT (id) DO NOTHING
			RETURNING id, item_id, seq
		), seqs AS (
			UPDATE items SET max_seq = greatest(items.max_seq, x.ms)
			FROM (SELECT item_id, max(seq) AS ms FROM ins GROUP BY item_id) x WHERE items.id = x.item_id
			RETURNING items.id
		)`

// Reasons an entry was not drawn, kept on its row.
const (
	reasonNotDrawn  = "not drawn: the draw gave the units to better ranks"
	reasonLateEntry = "entered the draw but reached the database after it had closed"
	reasonTwice     = "a second entry of the same shopper: only the first one was drawn"
)

// DrawQueuePosition records pos as the queue position the sale's draw waits for the writers to
// pass, unless one was recorded before, and returns the one recorded (the first: every instance
// deciding the draw waits for the same position).
func (d *DB) DrawQueuePosition(ctx context.Context, saleID int64, pos uint64) (uint64, error) {
	var out int64
	err := d.g.WithContext(ctx).Raw(`UPDATE sales SET draw_queue_pos = coalesce(draw_queue_pos, ?) WHERE id = ? RETURNING draw_queue_pos`,
		int64(pos), saleID).Scan(&out).Error
	if err != nil {
		return 0, fmt.Errorf("draw queue position(sale %d): %w", saleID, err)
	}
	return uint64(out), nil
}

// DrawsDue lists the sales whose draw window has closed by now, still undecided in Postgres or
// decided within the last hour (a shard may not have applied it yet), and not ended an hour ago.
func (d *DB) DrawsDue(ctx context.Context, now time.Time) ([]int64, error) {
	var ids []int64
	err := d.g.WithContext(ctx).Raw(`SELECT id FROM sales WHERE fair_start_millis > 0
			AND starts_at + make_interval(secs => fair_start_millis / 1000.0) <= ?
			AND (draw_closed_at IS NULL OR draw_closed_at > ?::timestamptz - interval '1 hour')
			AND ends_at > ?::timestamptz - interval '1 hour'
		ORDER BY id`, now, now, now).Scan(&ids).Error
	if err != nil {
		return nil, fmt.Errorf("draws due: %w", err)
	}
	return ids, nil
}

// CloseDraw decides a sale's draw in one transaction, once: the sale's row and its items' rows
// locked, each shopper's first entry ranked per item, the best ranks up to the units left become
// PENDING (their payment window starts now), every other entry NOT_SELECTED; the items' units
// sold and left after the draw, and the sale's draw_closed_at, entries and winners, are written
// with it. A draw decided before is not decided again. It returns the decision (as decided now or
// before) for ApplyDraw, and whether it was decided now.
func (d *DB) CloseDraw(ctx context.Context, saleID int64) (Decision, bool, error) {
	now := false
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		window, seed, closed, err := lockForDraw(tx, saleID)
		if err != nil || closed {
			return err
		}
		now = true
		if err := rankEntries(tx, saleID, seed); err != nil {
			return err
		}
		winners, err := giveUnits(tx, saleID, window)
		if err != nil {
			return err
		}
		if err := endTheOthers(tx, saleID); err != nil {
			return err
		}
		return recordDraw(tx, saleID, winners)
	})
	if err != nil {
		return Decision{}, false, fmt.Errorf("close draw(sale %d): %w", saleID, err)
	}
	dec, err := d.decision(ctx, saleID)
	return dec, now, err
}

// lockForDraw takes the sale's row, then its items' rows in id order (as the writer, expiry and
// cancel take them), and tells the sale's payment window, its draw's seed and whether its draw
// was decided before.
func lockForDraw(tx *gorm.DB, saleID int64) (window int, seed []byte, closed bool, err error) {
	var sale struct {
		Found    bool
		Closed   bool
		Window   int
		DrawSeed []byte
	}
	if err := tx.Raw(`SELECT true AS found, draw_closed_at IS NOT NULL AS closed, payment_window_seconds AS window, draw_seed
		FROM sales WHERE id = ? FOR UPDATE`, saleID).Scan(&sale).Error; err != nil {
		return 0, nil, false, err
	}
	if !sale.Found {
		return 0, nil, false, ErrNotFound
	}
	if sale.Closed {
		return 0, nil, true, nil
	}
	return sale.Window, sale.DrawSeed, false, tx.Exec(`SELECT id FROM items WHERE sale_id = ? ORDER BY id FOR UPDATE`, saleID).Error
}

// rankEntries writes each entry's draw key (shop.DrawKey: the seed's HMAC of its order id) and
// ranks, per item, each shopper's first entry by it, smallest first (draw_rank 1, 2, …); a
// shopper's later entries, and one whose shopper holds a unit already, stay unranked (0).
func rankEntries(tx *gorm.DB, saleID int64, seed []byte) error {
	if len(seed) != shop.DrawSeedSize {
		return fmt.Errorf("sale %d has no draw seed", saleID)
	}
	var ids []string
	if err := tx.Raw(`SELECT id::text FROM orders WHERE sale_id = ? AND status = 'ENTERED'`, saleID).Scan(&ids).Error; err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	keys := make(pgArray, len(ids))
	for i, id := range ids {
		keys[i] = hex.EncodeToString(shop.DrawKey(seed, id))
	}
	if err := tx.Exec(`UPDATE orders o SET draw_key = decode(u.k, 'hex')
		FROM unnest(?::uuid[], ?::text[]) AS u(id, k) WHERE o.id = u.id`, pgArray(ids).literal(), keys.literal()).Error; err != nil {
		return err
	}
	// bytea compares byte by byte: as big-endian numbers of one length
	return tx.Exec(`WITH e AS (
			SELECT o.id, o.item_id, o.user_id, o.draw_key, o.per_sale,
			       row_number() OVER (PARTITION BY CASE WHEN o.per_sale THEN o.user_id::text ELSE o.item_id::text || ':' || o.user_id::text END
			                          ORDER BY o.reserved_at, o.id) AS nth
			FROM orders o WHERE o.sale_id = ? AND o.status = 'ENTERED'
		), r AS (
			SELECT e.id, row_number() OVER (PARTITION BY e.item_id ORDER BY e.draw_key) AS place
			FROM e WHERE e.nth = 1 AND NOT EXISTS (
				SELECT 1 FROM orders l WHERE l.sale_id = ? AND l.status IN ('PENDING', 'PAID') AND l.user_id = e.user_id
				AND (e.per_sale OR l.item_id = e.item_id))
		)
		UPDATE orders o SET draw_rank = r.place FROM r WHERE o.id = r.id`, saleID, saleID).Error
}

// giveUnits makes the ranked entries PENDING, per item the best ranks up to its units left (their
// payment window starts now), counts them in the items' sold, and returns how many.
func giveUnits(tx *gorm.DB, saleID int64, window int) (int, error) {
	var won []struct {
		ItemID int64
		N      int
	}
	if err := tx.Raw(`WITH r AS (
			SELECT o.id, o.item_id, o.draw_rank AS place FROM orders o
			WHERE o.sale_id = ? AND o.status = 'ENTERED' AND o.draw_rank > 0
		), w AS (
			UPDATE orders o SET status = CASE WHEN o.unit_price_cents = 0 THEN 'PAID' ELSE 'PENDING' END, created_at = now(),
			       pay_by = now() + make_interval(secs => ?), payment_status = CASE WHEN o.unit_price_cents = 0 THEN 'free' ELSE o.payment_status END,
			       paid_at = CASE WHEN o.unit_price_cents = 0 THEN now() END, paid_cents = CASE WHEN o.unit_price_cents = 0 THEN 0 END
			FROM r JOIN items i ON i.id = r.item_id
			WHERE o.id = r.id AND r.place <= i.quantity - i.sold
			RETURNING o.item_id
		)
		SELECT item_id, count(*) AS n FROM w GROUP BY item_id`, saleID, window).Scan(&won).Error; err != nil {
		return 0, err
	}
	winners := 0
	for _, x := range won {
		winners += x.N
		if err := tx.Exec(`UPDATE items SET sold = sold + ? WHERE id = ?`, x.N, x.ItemID).Error; err != nil {
			return 0, err
		}
	}
	return winners, nil
}

// endTheOthers ends every entry the draw did not give a unit NOT_SELECTED, saying why.
func endTheOthers(tx *gorm.DB, saleID int64) error {
	return tx.Exec(`UPDATE orders o SET status = 'NOT_SELECTED',
			failure = CASE WHEN EXISTS (SELECT 1 FROM orders f WHERE f.sale_id = o.sale_id AND f.draw_rank IS NOT NULL AND f.id <> o.id
				AND f.user_id = o.user_id AND (o.per_sale OR f.item_id = o.item_id)
				AND (f.reserved_at, f.id) < (o.reserved_at, o.id)) THEN ? ELSE ? END
		WHERE o.sale_id = ? AND o.status = 'ENTERED'`, reasonTwice, reasonNotDrawn, saleID).Error
}

// recordDraw writes what the draw left of each item and the sale's draw: when, entries, winners.
func recordDraw(tx *gorm.DB, saleID int64, winners int) error {
	if err := tx.Exec(`UPDATE items SET draw_left = quantity - sold WHERE sale_id = ?`, saleID).Error; err != nil {
		return err
	}
	return tx.Exec(`UPDATE sales SET draw_closed_at = now(), draw_winners = ?,
			draw_entries = (SELECT count(*) FROM orders WHERE sale_id = ? AND draw_rank IS NOT NULL)
		WHERE id = ?`, winners, saleID, saleID).Error
}

// decision reads a decided draw: its winners (whatever became of their orders since: a winner's
// unit returns through the usual return once its shard applied the draw) and the units it left.
func (d *DB) decision(ctx context.Context, saleID int64) (Decision, error) {
	dec := Decision{Left: map[int64]int64{}}
	var items []struct {
		ID       int64
		DrawLeft *int64
	}
	if err := d.g.WithContext(ctx).Raw(`SELECT id, draw_left FROM items WHERE sale_id = ? ORDER BY position`, saleID).Scan(&items).Error; err != nil {
		return dec, fmt.Errorf("draw decision(sale %d): %w", saleID, err)
	}
	for _, it := range items {
		if it.DrawLeft == nil {
			return dec, fmt.Errorf("draw decision(sale %d): item %d has no units left recorded: %w", saleID, it.ID, ErrNotFound)
		}
		dec.Items = append(dec.Items, it.ID)
		dec.Left[it.ID] = *it.DrawLeft
	}
	if err := d.g.WithContext(ctx).Raw(`SELECT purchase_limit FROM sales WHERE id = ?`, saleID).Scan(&dec.Limit).Error; err != nil {
		return dec, fmt.Errorf("draw decision(sale %d): %w", saleID, err)
	}
	var rows []struct {
		ID     string
		ItemID int64
		UserID int64
	}
	if err := d.g.WithContext(ctx).Raw(`SELECT id::text, item_id, user_id FROM orders
		WHERE sale_id = ? AND draw_rank IS NOT NULL AND status NOT IN ('ENTERED', 'NOT_SELECTED')`, saleID).Scan(&rows).Error; err != nil {
		return dec, fmt.Errorf("draw decision(sale %d): %w", saleID, err)
	}
	for _, r := range rows {
		dec.Winners = append(dec.Winners, DrawWinner{OrderID: r.ID, ItemID: r.ItemID, UserID: r.UserID})
	}
	return dec, nil
}

// DrawOf is a sale's draw: its window, counts, pauses, commitment, and once decided its seed and
// the units each item offered.
func (d *DB) DrawOf(ctx context.Context, saleID int64) (shop.Draw, error) {
	var row struct {
		Found    bool
		Window   int
		ClosedAt *time.Time
		Winners  *int
		Written  int
		Pauses   int
		Seed     []byte
	}
	err := d.g.WithContext(ctx).Raw(`SELECT true AS found, fair_start_millis AS window, draw_closed_at AS closed_at, draw_winners AS winners,
			draw_pauses AS pauses, draw_seed AS seed,
			(SELECT count(*) FROM orders o WHERE o.sale_id = s.id AND o.draw_rank IS NOT NULL) AS written
		FROM sales s WHERE s.id = ?`, saleID).Scan(&row).Error
	if err != nil {
		return shop.Draw{}, fmt.Errorf("draw(sale %d): %w", saleID, err)
	}
	if !row.Found {
		return shop.Draw{}, ErrNotFound
	}
	sale := shop.Sale{FairStartMillis: row.Window, DrawSeed: row.Seed, DrawClosedAt: row.ClosedAt}
	dr := shop.Draw{WindowMillis: row.Window, Entries: row.Written, ClosedAt: row.ClosedAt, Pauses: row.Pauses,
		Commitment: sale.Commitment(), Seed: sale.RevealedSeed()}
	if row.Winners != nil {
		dr.Winners = *row.Winners
	}
	if row.ClosedAt == nil {
		return dr, nil
	}
	// the units each item offered to the draw: what it left, and what it gave
	err = d.g.WithContext(ctx).Raw(`SELECT i.id AS item_id, coalesce(i.draw_left, 0) + (SELECT count(*) FROM orders o
			WHERE o.item_id = i.id AND o.draw_rank > 0 AND o.status NOT IN ('ENTERED', 'NOT_SELECTED')) AS units
		FROM items i WHERE i.sale_id = ? ORDER BY i.position`, saleID).Scan(&dr.Items).Error
	if err != nil {
		return shop.Draw{}, fmt.Errorf("draw(sale %d): %w", saleID, err)
	}
	return dr, nil
}

// DrawDecided tells whether the sale's draw was decided (in Postgres; its shards may not have
// applied it yet).
func (d *DB) DrawDecided(ctx context.Context, saleID int64) (bool, error) {
	var decided bool
	if err := d.g.WithContext(ctx).Raw(`SELECT draw_closed_at IS NOT NULL FROM sales WHERE id = ?`, saleID).Scan(&decided).Error; err != nil {
		return false, fmt.Errorf("draw decided(sale %d): %w", saleID, err)
	}
	return decided, nil
}

// DrawRecord pages through a draw's entries by item, then rank (best first; the unranked last),
// after the cursor (the last order id of the page before; "" from the start).
func (d *DB) DrawRecord(ctx context.Context, saleID int64, cursor string, limit int) ([]shop.DrawEntry, string, error) {
	after := "00000000-0000-0000-0000-000000000000"
	if cursor != "" {
		var known bool
		if shop.IsOrderID(cursor) {
			if err := d.g.WithContext(ctx).Raw(`SELECT EXISTS (SELECT 1 FROM orders WHERE id = ?::uuid AND sale_id = ? AND draw_rank IS NOT NULL)`,
				cursor, saleID).Scan(&known).Error; err != nil {
				return nil, "", fmt.Errorf("draw record(sale %d): %w", saleID, err)
			}
		}
		if !known {
			return nil, "", shop.Errorf(shop.CodeInvalidInput, "cursor is not one this server gave out; start from the first page")
		}
		after = cursor
	}
	var rows []struct {
		ID       string
		UserID   int64
		Username *string
		ItemID   int64
		Rank     int64
		At       time.Time
		Status   string
	}
	// unranked entries (rank 0) sort after the ranked ones of their item
	err := d.g.WithContext(ctx).Raw(`WITH c AS (
			SELECT item_id, CASE WHEN draw_rank > 0 THEN draw_rank ELSE 9223372036854775807 END AS rk, id
			FROM orders WHERE id = ?::uuid AND sale_id = ?
		)
		SELECT o.id::text, o.user_id, u.username, o.item_id, o.draw_rank AS rank, o.reserved_at AS at, o.status
		FROM orders o LEFT JOIN users u ON u.id = o.user_id
		WHERE o.sale_id = ? AND o.draw_rank IS NOT NULL
		  AND (NOT EXISTS (SELECT 1 FROM c)
		       OR (o.item_id, CASE WHEN o.draw_rank > 0 THEN o.draw_rank ELSE 9223372036854775807 END, o.id) > (SELECT item_id, rk, id FROM c))
		ORDER BY o.item_id, CASE WHEN o.draw_rank > 0 THEN o.draw_rank ELSE 9223372036854775807 END, o.id LIMIT ?`,
		after, saleID, saleID, limit+1).Scan(&rows).Error
	if err != nil {
		return nil, "", fmt.Errorf("draw record(sale %d): %w", saleID, err)
	}
	next := ""
	if len(rows) > limit {
		rows = rows[:limit]
		next = rows[len(rows)-1].ID
	}
	out := make([]shop.DrawEntry, len(rows))
	for i, r := range rows {
		out[i] = shop.DrawEntry{OrderID: r.ID, UserID: r.UserID, ItemID: r.ItemID, Rank: r.Rank, EnteredAt: r.At, Status: r.Status}
		if r.Username != nil {
			out[i].Username = *r.Username
		}
	}
	return out, next, nil
}

// Entry tells whether the shopper's shard holds orderID as an undecided draw entry (not yet
// written, or written and waiting for the draw), and when it entered.
func (s *Stock) Entry(ctx context.Context, saleID, userID int64, orderID string) (time.Time, bool, error) {
	sh, err := s.ShardOfUser(ctx, saleID, userID)
	if err != nil {
		return time.Time{}, false, err
	}
	v, err := s.rdb.HGet(ctx, DrawKeyOf(saleID, sh), orderID).Result()
	if err == redis.Nil {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("draw entry(sale %d, order %s): %w", saleID, orderID, err)
	}
	// "item:user:enteredAtMillis" (a fourth field, a rank, from before ranks were the draw's)
	f := strings.Split(v, ":")
	if len(f) < 3 || f[1] != strconv.FormatInt(userID, 10) {
		return time.Time{}, false, nil
	}
	ms, _ := strconv.ParseInt(f[2], 10, 64)
	return time.UnixMilli(ms), true, nil
}

// UndecidedEntries counts a sale's entries still ENTERED although its draw was decided (none,
// whatever crashed: the decision and an entry's write exclude each other on the sale's row).
func (d *DB) UndecidedEntries(ctx context.Context, saleID int64) (int, error) {
	var n int64
	err := d.g.WithContext(ctx).Raw(`SELECT count(*) FROM orders o JOIN sales s ON s.id = o.sale_id
		WHERE o.sale_id = ? AND o.status = 'ENTERED' AND s.draw_closed_at IS NOT NULL`, saleID).Scan(&n).Error
	if err != nil {
		return 0, fmt.Errorf("undecided entries(sale %d): %w", saleID, err)
	}
	return int(n), nil
}
