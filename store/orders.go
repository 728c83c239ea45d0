package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
)

// NewOrder is an order the writer inserts: a reservation Redis granted and the queue delivered.
// Its payment deadline is counted by Postgres from the moment it is written, with its sale's
// payment window, so a writer backlog never eats the shopper's window.
type NewOrder struct {
	ID         string
	SaleID     int64
	ItemID     int64
	UserID     int64
	Seq        int64
	ReservedAt time.Time
}

// pgArray holds values to send as one Postgres array literal, so one statement carries a whole
// batch; GORM would expand a Go slice into a list of placeholders.
type pgArray []string

func (a pgArray) literal() string { return "{" + strings.Join(a, ",") + "}" }

func int64Array(ids []int64) string {
	a := make(pgArray, len(ids))
	for i, id := range ids {
		a[i] = strconv.FormatInt(id, 10)
	}
	return a.literal()
}

// lockItems takes the row locks of items in id order. Every transaction that changes items.sold
// (the writer, expiry, cancel) takes its locks this way first, so two of them can never wait on
// each other in opposite orders (deadlock, 40P01).
func lockItems(tx *gorm.DB, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	return tx.Exec(`SELECT id FROM items WHERE id = ANY(?::bigint[]) ORDER BY id FOR UPDATE`, int64Array(ids)).Error
}

// InsertOrders writes a batch of new orders as PENDING in one transaction: the items' rows locked
// in id order, then ONE statement: the rows with INSERT … ON CONFLICT DO NOTHING, and for each item
// sold = sold + n (which the CHECK (sold <= quantity) guards) and max_seq. It returns the ids
// inserted (an id already present, a redelivery, or a second live order of the same shopper in
// the item, or in the sale under a per-sale limit, is skipped). If an item has no room for its
// rows the whole batch rolls back with ErrNoRoom; another constraint refusal is ErrRefused.
func (d *DB) InsertOrders(ctx context.Context, orders []NewOrder) ([]string, error) {
	if len(orders) == 0 {
		return nil, nil
	}
	shIDs, shards, err := d.shardsOfOrders(ctx, orders)
	if err != nil {
		return nil, fmt.Errorf("insert orders: %w", err)
	}
	c := columnsOf(orders)
	var inserted []string
	args := []any{int64Array(c.itemIDs), c.ids.literal(), c.items.literal(), c.users.literal(), c.reserved.literal(), c.seqs.literal()}
	perShard := "" // a batch of unsharded sales only: the statement of before stock shards, unchanged
	if len(shIDs) > 0 {
		perShard = insertOrdersPerShard
		args = append(args, shIDs.literal(), shards.literal())
	}
	err = d.g.WithContext(ctx).Raw(insertOrdersSQL+perShard+insertOrdersReturning, args...).Scan(&inserted).Error
	if err != nil {
		return nil, insertOrdersError(err)
	}
	return inserted, nil
}

// orderColumns is a batch of new orders as one Postgres array literal per column, and the
// batch's items, each once in the order first met.
type orderColumns struct {
	ids, items, users, reserved, seqs pgArray
	itemIDs                           []int64
}

// columnsOf lays a batch of new orders out by column.
func columnsOf(orders []NewOrder) orderColumns {
	c := orderColumns{
		ids:      make(pgArray, len(orders)),
		items:    make(pgArray, len(orders)),
		users:    make(pgArray, len(orders)),
		reserved: make(pgArray, len(orders)),
		seqs:     make(pgArray, len(orders)),
	}
	itemSet := map[int64]bool{}
	for i, o := range orders {
		c.ids[i] = o.ID
		c.items[i] = strconv.FormatInt(o.ItemID, 10)
		c.users[i] = strconv.FormatInt(o.UserID, 10)
		c.reserved[i] = `"` + o.ReservedAt.UTC().Format(time.RFC3339Nano) + `"`
		c.seqs[i] = strconv.FormatInt(o.Seq, 10)
		if !itemSet[o.ItemID] {
			itemSet[o.ItemID] = true
			c.itemIDs = append(c.itemIDs, o.ItemID)
		}
	}
	return c
}

// shardsOfOrders names the orders of sharded sales and the shard of each, so Postgres keeps each
// shard's highest seq (none for a batch of unsharded sales).
func (d *DB) shardsOfOrders(ctx context.Context, orders []NewOrder) (ids, shards pgArray, err error) {
	for _, o := range orders {
		k, err := d.StockShardsCached(ctx, o.SaleID)
		if err != nil {
			return nil, nil, err
		}
		if k > 1 {
			ids = append(ids, o.ID)
			shards = append(shards, strconv.Itoa(ShardOf(o.UserID, k)))
		}
	}
	return ids, shards, nil
}

// insertOrdersSQL is the writer's one statement, one round trip: the initplan on lk locks the
// items' rows in id order before the first order row is produced, so concurrent batches never
// deadlock. The rows go in with ON CONFLICT DO NOTHING, and each item's sold and max_seq move by
// what went in. A free item's order (price 0) needs no payment: it goes in PAID, payment_status
// 'free' (shop.Order's rule, written here in the one statement that writes orders). insertOrdersPerShard follows it for a batch with orders of sharded sales, then
// insertOrdersReturning.
const insertOrdersSQL = `WITH lk AS (
			SELECT id FROM items WHERE id = ANY(?::bigint[]) ORDER BY id FOR UPDATE
		), u AS (
			SELECT u.id, u.item_id, i.sale_id, u.user_id, u.reserved_at, u.seq, i.price_cents,
			       coalesce(s.purchase_limit = 'per-sale', false) AS per_sale,
			       now() + make_interval(secs => s.payment_window_seconds) AS pay_by
			FROM unnest(?::uuid[], ?::bigint[], ?::bigint[], ?::timestamptz[], ?::bigint[])
			     AS u(id, item_id, user_id, reserved_at, seq)
			LEFT JOIN items i ON i.id = u.item_id
			LEFT JOIN sales s ON s.id = i.sale_id
			WHERE (SELECT count(*) FROM lk) >= 0
		), ins AS (
			INSERT INTO orders (id, item_id, sale_id, user_id, status, reserved_at, pay_by, seq, per_sale, unit_price_cents,
			                    payment_status, paid_at, paid_cents)
			SELECT id, item_id, sale_id, user_id, CASE WHEN price_cents = 0 THEN 'PAID' ELSE 'PENDING' END, reserved_at, pay_by, seq, per_sale, price_cents,
			       CASE WHEN price_cents = 0 THEN 'free' ELSE 'none' END, CASE WHEN price_cents = 0 THEN now() END, CASE WHEN price_cents = 0 THEN 0 END
			FROM u
			ON CONFLICT DO NOTHING
			RETURNING id, item_id, seq
		), per_item AS (
			SELECT item_id, count(*) AS n, max(seq) AS ms FROM ins GROUP BY item_id
		), upd AS (
			UPDATE items SET sold = items.sold + per_item.n, max_seq = greatest(items.max_seq, per_item.ms)
			FROM per_item WHERE items.id = per_item.item_id
			RETURNING items.id
		)`

// insertOrdersPerShard keeps each shard's highest seq per item, for the keeper's per-shard loss
// detection; the items' rows are locked already (lk), so these rows take no new lock order.
const insertOrdersPerShard = `, per_shard AS (
			INSERT INTO item_shard_seqs (item_id, shard, max_seq)
			SELECT ins.item_id, x.shard, max(ins.seq) FROM ins JOIN unnest(?::uuid[], ?::int[]) AS x(id, shard) ON x.id = ins.id
			GROUP BY ins.item_id, x.shard
			ON CONFLICT (item_id, shard) DO UPDATE SET max_seq = greatest(item_shard_seqs.max_seq, excluded.max_seq)
			RETURNING item_id
		)`

const insertOrdersReturning = `
		SELECT id::text FROM ins`

// insertOrdersError tells why the batch was refused: an item with no room for its rows
// (ErrNoRoom), another constraint (ErrRefused), or the failure itself.
func insertOrdersError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23514" && pe.TableName == "items" {
		return fmt.Errorf("insert orders: %w", ErrNoRoom)
	}
	if isConstraint(err) {
		return fmt.Errorf("insert orders: %w: %v", ErrRefused, err)
	}
	return fmt.Errorf("insert orders: %w", err)
}

// ErrorCause names the cause of a failure for metrics: the Postgres SQLSTATE ("40P01" is a
// deadlock), "redis" for a Redis answer refusing the request itself (IsAnswered), "redis_oom",
// "redis_misconf", "redis_readonly", … for a Redis outage by its kind, else "other".
func ErrorCause(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	if c := redisErrorCause(err); c != "" {
		return c
	}
	return "other"
}

// IsPermanent reports whether a Postgres error is about the data itself, so it will recur
// however often the same statement is retried: a data exception (class 22: a value out of range,
// malformed) or an integrity constraint (class 23). Everything else (unreachable, restarting,
// read-only after a failover, permissions, a schema mid-deploy, a lost race) is transient: the
// writer retries it for as long as it lasts and never drops an acknowledged order over it.
func IsPermanent(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) < 2 {
		return false
	}
	switch pe.Code[:2] {
	case "22", "23":
		return true
	}
	return false
}

// InsertFailedOrder records an order the writer will not write as FAILED, with the reason, so
// its shopper sees why and the ledger holds every order the queue carried. A second call for the
// same id changes nothing; an order of an item Postgres does not know is not recorded (ok false).
func (d *DB) InsertFailedOrder(ctx context.Context, o NewOrder, reason string) (bool, error) {
	res := d.g.WithContext(ctx).Exec(`INSERT INTO orders (id, item_id, sale_id, user_id, status, reserved_at, pay_by, seq, failure)
		SELECT ?, i.id, i.sale_id, ?, 'FAILED', ?, now(), ?, ? FROM items i WHERE i.id = ?
		ON CONFLICT (id) DO NOTHING`, o.ID, o.UserID, o.ReservedAt, o.Seq, reason, o.ItemID)
	if res.Error != nil {
		return false, fmt.Errorf("record failed order %s: %w", o.ID, res.Error)
	}
	return true, nil
}

// HeldOrder returns the live order (PENDING or PAID) that keeps a shopper from another one: of the
// item, or of any item of the sale under a per-sale limit ("" when none).
func (d *DB) HeldOrder(ctx context.Context, saleID, itemID, userID int64) (string, error) {
	var id string
	err := d.g.WithContext(ctx).Raw(`SELECT id::text FROM orders WHERE user_id = ? AND status IN ('PENDING','PAID')
		AND (item_id = ? OR (per_sale AND sale_id = ?)) ORDER BY reserved_at LIMIT 1`, userID, itemID, saleID).Scan(&id).Error
	if err != nil {
		return "", fmt.Errorf("held order of user %d: %w", userID, err)
	}
	return id, nil
}

// ExistingOrders returns the status of each of ids that Postgres holds.
func (d *DB) ExistingOrders(ctx context.Context, ids []string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	var found []struct {
		ID     string
		Status string
	}
	err := d.g.WithContext(ctx).Raw(`SELECT id::text AS id, status FROM orders WHERE id = ANY(?::uuid[])`, pgArray(ids).literal()).Scan(&found).Error
	if err != nil {
		return nil, fmt.Errorf("existing orders: %w", err)
	}
	for _, r := range found {
		out[r.ID] = r.Status
	}
	return out, nil
}
