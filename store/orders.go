package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/shop"
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
	ids := make(pgArray, len(orders))
	items := make(pgArray, len(orders))
	users := make(pgArray, len(orders))
	reserved := make(pgArray, len(orders))
	seqs := make(pgArray, len(orders))
	itemSet := map[int64]bool{}
	var itemIDs []int64
	// orders of sharded sales: their shard, so Postgres keeps each shard's highest seq
	var shIDs, shards pgArray
	for _, o := range orders {
		k, err := d.StockShardsCached(ctx, o.SaleID)
		if err != nil {
			return nil, fmt.Errorf("insert orders: %w", err)
		}
		if k > 1 {
			shIDs = append(shIDs, o.ID)
			shards = append(shards, strconv.Itoa(ShardOf(o.UserID, k)))
		}
	}
	for i, o := range orders {
		ids[i] = o.ID
		items[i] = strconv.FormatInt(o.ItemID, 10)
		users[i] = strconv.FormatInt(o.UserID, 10)
		reserved[i] = `"` + o.ReservedAt.UTC().Format(time.RFC3339Nano) + `"`
		seqs[i] = strconv.FormatInt(o.Seq, 10)
		if !itemSet[o.ItemID] {
			itemSet[o.ItemID] = true
			itemIDs = append(itemIDs, o.ItemID)
		}
	}
	// One statement, one round trip: the initplan on lk locks the items' rows in id order
	// before the first order row is produced, so concurrent batches never deadlock.
	var inserted []string
	args := []any{int64Array(itemIDs), ids.literal(), items.literal(), users.literal(), reserved.literal(), seqs.literal()}
	perShard := "" // a batch of unsharded sales only: the statement of before stock shards, unchanged
	if len(shIDs) > 0 {
		// Each shard's highest seq per item, for the keeper's per-shard loss detection; the
		// items' rows are locked already (lk), so these rows take no new lock order.
		perShard = `, per_shard AS (
			INSERT INTO item_shard_seqs (item_id, shard, max_seq)
			SELECT ins.item_id, x.shard, max(ins.seq) FROM ins JOIN unnest(?::uuid[], ?::int[]) AS x(id, shard) ON x.id = ins.id
			GROUP BY ins.item_id, x.shard
			ON CONFLICT (item_id, shard) DO UPDATE SET max_seq = greatest(item_shard_seqs.max_seq, excluded.max_seq)
			RETURNING item_id
		)`
		args = append(args, shIDs.literal(), shards.literal())
	}
	err := d.g.WithContext(ctx).Raw(`WITH lk AS (
			SELECT id FROM items WHERE id = ANY(?::bigint[]) ORDER BY id FOR UPDATE
		), u AS (
			SELECT u.id, u.item_id, i.sale_id, u.user_id, u.reserved_at, u.seq,
			       coalesce(s.purchase_limit = 'per-sale', false) AS per_sale,
			       now() + make_interval(secs => s.payment_window_seconds) AS pay_by
			FROM unnest(?::uuid[], ?::bigint[], ?::bigint[], ?::timestamptz[], ?::bigint[])
			     AS u(id, item_id, user_id, reserved_at, seq)
			LEFT JOIN items i ON i.id = u.item_id
			LEFT JOIN sales s ON s.id = i.sale_id
			WHERE (SELECT count(*) FROM lk) >= 0
		), ins AS (
			INSERT INTO orders (id, item_id, sale_id, user_id, status, reserved_at, pay_by, seq, per_sale)
			SELECT id, item_id, sale_id, user_id, 'PENDING', reserved_at, pay_by, seq, per_sale FROM u
			ON CONFLICT DO NOTHING
			RETURNING id, item_id, seq
		), per_item AS (
			SELECT item_id, count(*) AS n, max(seq) AS ms FROM ins GROUP BY item_id
		), upd AS (
			UPDATE items SET sold = items.sold + per_item.n, max_seq = greatest(items.max_seq, per_item.ms)
			FROM per_item WHERE items.id = per_item.item_id
			RETURNING items.id
		)`+perShard+`
		SELECT id::text FROM ins`, args...).Scan(&inserted).Error
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23514" && pe.TableName == "items" {
			return nil, fmt.Errorf("insert orders: %w", ErrNoRoom)
		}
		if isConstraint(err) {
			return nil, fmt.Errorf("insert orders: %w: %v", ErrRefused, err)
		}
		return nil, fmt.Errorf("insert orders: %w", err)
	}
	return inserted, nil
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

// OrderByID loads one order.
func (d *DB) OrderByID(ctx context.Context, id string) (Order, error) {
	var o Order
	err := d.g.WithContext(ctx).Raw(`SELECT * FROM orders WHERE id = ?::uuid`, id).Scan(&o).Error
	if err != nil {
		return Order{}, fmt.Errorf("order %s: %w", id, err)
	}
	if o.ID == "" {
		return Order{}, ErrNotFound
	}
	return o, nil
}

// OrderDetail is an order with what its shopper needs to recognise it.
type OrderDetail struct {
	Order
	ItemName   string
	PriceCents int64
	Currency   string
	SaleName   string
}

const orderDetailSelect = `SELECT o.*, i.name AS item_name, i.price_cents, s.currency, s.name AS sale_name
	FROM orders o JOIN items i ON i.id = o.item_id JOIN sales s ON s.id = o.sale_id`

// OrderDetailByID loads one order with its item and sale.
func (d *DB) OrderDetailByID(ctx context.Context, id string) (OrderDetail, error) {
	var o OrderDetail
	err := d.g.WithContext(ctx).Raw(orderDetailSelect+` WHERE o.id = ?::uuid`, id).Scan(&o).Error
	if err != nil {
		return OrderDetail{}, fmt.Errorf("order %s: %w", id, err)
	}
	if o.ID == "" {
		return OrderDetail{}, ErrNotFound
	}
	return o, nil
}

// OrderCursor is a position in a newest-first list of orders.
type OrderCursor struct {
	ReservedAt time.Time
	ID         string
}

// Encode makes the cursor an opaque string for a client.
func (c OrderCursor) Encode() string { return encodeCursor(c.ReservedAt, c.ID) }

// DecodeOrderCursor parses a cursor made by Encode.
func DecodeOrderCursor(s string) (OrderCursor, bool) {
	at, id, ok := decodeCursor(s)
	if !ok || len(id) != 36 {
		return OrderCursor{}, false
	}
	return OrderCursor{ReservedAt: at, ID: id}, true
}

// OrdersOfUser lists a shopper's orders (of one sale if saleID > 0) newest first (by reservation time), after cursor (nil: from the newest), at most
// limit; next is nil on the last page.
func (d *DB) OrdersOfUser(ctx context.Context, userID, saleID int64, after *OrderCursor, limit int) ([]OrderDetail, *OrderCursor, error) {
	q := orderDetailSelect + ` WHERE o.user_id = ?`
	args := []any{userID}
	if saleID > 0 {
		q += ` AND o.sale_id = ?`
		args = append(args, saleID)
	}
	if after != nil {
		q += ` AND (o.reserved_at, o.id) < (?, ?::uuid)`
		args = append(args, after.ReservedAt, after.ID)
	}
	q += ` ORDER BY o.reserved_at DESC, o.id DESC LIMIT ?`
	args = append(args, limit+1)
	var out []OrderDetail
	if err := d.g.WithContext(ctx).Raw(q, args...).Scan(&out).Error; err != nil {
		return nil, nil, fmt.Errorf("orders of user %d: %w", userID, err)
	}
	if len(out) <= limit {
		return out, nil, nil
	}
	out = out[:limit]
	last := out[limit-1]
	return out, &OrderCursor{ReservedAt: last.ReservedAt, ID: last.ID}, nil
}

// PayOrder marks a PENDING order of userID as PAID if its payment window is still open by
// Postgres's clock (the clock expiry uses, so pay and expire agree). It reports whether this call
// changed it; the caller reads the order to tell why not.
func (d *DB) PayOrder(ctx context.Context, id string, userID int64) (bool, error) {
	res := d.g.WithContext(ctx).Exec(`UPDATE orders SET status = 'PAID', paid_at = now()
		WHERE id = ?::uuid AND user_id = ? AND status = 'PENDING' AND pay_by > now()`, id, userID)
	if res.Error != nil {
		return false, fmt.Errorf("pay order %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// StockReturn is a unit Postgres gave back (an order EXPIRED or CANCELLED) that Redis must get
// back too; the row lives until it has.
type StockReturn struct {
	OrderID  string
	SaleID   int64
	ItemID   int64
	UserID   int64
	Reason   string
	SaleOver bool `gorm:"->"` // the sale ended over an hour ago (PendingReturns only)
}

// endOrders moves the PENDING orders that where selects (a subquery of order ids, locked) to
// status, gives their units back (sold - n) and records a stock return for each, in one
// transaction with the items locked first in id order.
func (d *DB) endOrders(ctx context.Context, status string, items []int64, where string, args ...any) ([]StockReturn, error) {
	var out []StockReturn
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := lockItems(tx, items); err != nil {
			return err
		}
		all := append([]any{status}, args...)
		all = append(all, status)
		return tx.Raw(`WITH ended AS (
				UPDATE orders SET status = ? WHERE id IN (`+where+`) AND status = 'PENDING'
				RETURNING id, sale_id, item_id, user_id
			), ret AS (
				INSERT INTO stock_returns (order_id, sale_id, item_id, user_id, reason)
				SELECT id, sale_id, item_id, user_id, ? FROM ended
			), upd AS (
				UPDATE items SET sold = items.sold - c.n
				FROM (SELECT item_id, count(*) AS n FROM ended GROUP BY item_id) c WHERE items.id = c.item_id
			)
			SELECT id::text AS order_id, sale_id, item_id, user_id FROM ended`, all...).Scan(&out).Error
	})
	if err != nil {
		return nil, fmt.Errorf("%s orders: %w", strings.ToLower(status), err)
	}
	for i := range out {
		out[i].Reason = status
	}
	return out, nil
}

// ExpireDue expires up to limit PENDING orders whose payment deadline has passed (by Postgres's
// clock). Each order changes once, whatever number of instances run this at once.
func (d *DB) ExpireDue(ctx context.Context, limit int) ([]StockReturn, error) {
	var items []int64
	err := d.g.WithContext(ctx).Raw(`SELECT DISTINCT item_id FROM (SELECT item_id FROM orders
		WHERE status = 'PENDING' AND pay_by <= now() ORDER BY pay_by LIMIT ?) d`, limit).Scan(&items).Error
	if err != nil {
		return nil, fmt.Errorf("expire orders: %w", err)
	}
	if len(items) == 0 {
		return nil, nil
	}
	return d.endOrders(ctx, shop.StatusExpired, items, `SELECT id FROM orders WHERE status = 'PENDING' AND pay_by <= now()
		AND item_id = ANY(?::bigint[]) ORDER BY pay_by LIMIT ? FOR UPDATE SKIP LOCKED`, int64Array(items), limit)
}

// ExpireOrder expires one PENDING order if its deadline has passed (a shopper paying too late
// sees the state the answer names).
func (d *DB) ExpireOrder(ctx context.Context, o Order) ([]StockReturn, error) {
	return d.endOrders(ctx, shop.StatusExpired, []int64{o.ItemID}, `SELECT id FROM orders WHERE id = ?::uuid AND status = 'PENDING' AND pay_by <= now() FOR UPDATE`, o.ID)
}

// CancelOrder cancels a PENDING order of userID; the result is empty if it was not PENDING.
func (d *DB) CancelOrder(ctx context.Context, o Order, userID int64) ([]StockReturn, error) {
	return d.endOrders(ctx, shop.StatusCancelled, []int64{o.ItemID}, `SELECT id FROM orders WHERE id = ?::uuid AND user_id = ? AND status = 'PENDING' FOR UPDATE`, o.ID, userID)
}

// PendingReturns lists stock returns Redis has not confirmed yet, oldest first.
func (d *DB) PendingReturns(ctx context.Context, limit int) ([]StockReturn, error) {
	var out []StockReturn
	err := d.g.WithContext(ctx).Raw(`SELECT r.order_id::text AS order_id, r.sale_id, r.item_id, r.user_id, r.reason,
			s.ends_at < now() - interval '1 hour' AS sale_over
		FROM stock_returns r JOIN sales s ON s.id = r.sale_id
		ORDER BY r.created_at LIMIT ?`, limit).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("stock returns: %w", err)
	}
	return out, nil
}

// DeleteReturns forgets stock returns Redis has applied.
func (d *DB) DeleteReturns(ctx context.Context, orderIDs []string) error {
	if len(orderIDs) == 0 {
		return nil
	}
	err := d.g.WithContext(ctx).Exec(`DELETE FROM stock_returns WHERE order_id = ANY(?::uuid[])`, pgArray(orderIDs).literal()).Error
	if err != nil {
		return fmt.Errorf("delete stock returns: %w", err)
	}
	return nil
}

// ErrRebuildBusy means another instance is rebuilding the same sale right now.
var ErrRebuildBusy = errors.New("another instance is rebuilding the sale")

// RebuildSnapshot bumps the sale's Redis epoch and reads, in the same repeatable-read snapshot,
// what Redis must hold for it: units left per item, the buyers, and the orders whose unit
// Postgres gave back but whose return Redis has not confirmed (they become tombstones, so the
// return is not applied on top of a rebuilt count). Two rebuilds of one sale never overlap: the
// second waits for the first's row lock and fails (retried on the next pass).
func (d *DB) RebuildSnapshot(ctx context.Context, saleID int64) (Snapshot, error) {
	snap := Snapshot{SaleID: saleID, Left: map[int64]int64{}, Quantity: map[int64]int64{}, Buyers: map[string]string{}}
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var sale struct {
			RedisEpoch    int64
			PurchaseLimit string
			StartsAt      time.Time
			EndsAt        time.Time
			Paused        bool
		}
		if err := tx.Raw(`UPDATE sales SET redis_epoch = redis_epoch + 1 WHERE id = ?
			RETURNING redis_epoch, purchase_limit, starts_at, ends_at, paused`, saleID).Scan(&sale).Error; err != nil {
			return err
		}
		if sale.RedisEpoch == 0 {
			return ErrNotFound
		}
		snap.Epoch, snap.Limit, snap.StartsAt, snap.EndsAt, snap.Paused = sale.RedisEpoch, sale.PurchaseLimit, sale.StartsAt, sale.EndsAt, sale.Paused
		var items []struct {
			ID       int64
			Quantity int64
			MaxSeq   int64
			Live     int64
		}
		if err := tx.Raw(`SELECT i.id, i.quantity, i.max_seq,
				(SELECT count(*) FROM orders o WHERE o.item_id = i.id AND o.status IN ('PENDING','PAID')) AS live
			FROM items i WHERE i.sale_id = ? ORDER BY i.position`, saleID).Scan(&items).Error; err != nil {
			return err
		}
		for _, it := range items {
			snap.Items = append(snap.Items, it.ID)
			snap.Left[it.ID] = it.Quantity - it.Live
			snap.Quantity[it.ID] = it.Quantity
			snap.MaxSeq = max(snap.MaxSeq, it.MaxSeq)
		}
		if err := tx.Raw(`SELECT stock_shards FROM sales WHERE id = ?`, saleID).Scan(&snap.Shards).Error; err != nil {
			return err
		}
		var live []struct {
			ID     string
			ItemID int64
			UserID int64
		}
		if err := tx.Raw(`SELECT id::text AS id, item_id, user_id FROM orders WHERE sale_id = ? AND status IN ('PENDING','PAID')`, saleID).Scan(&live).Error; err != nil {
			return err
		}
		for _, o := range live {
			snap.Buyers[BuyerMember(snap.Limit, o.ItemID, o.UserID)] = o.ID
		}
		return tx.Raw(`SELECT order_id::text FROM stock_returns WHERE sale_id = ?`, saleID).Scan(&snap.Gone).Error
	}, repeatableRead)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "40001" {
		return Snapshot{}, ErrRebuildBusy
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("rebuild snapshot(sale %d): %w", saleID, err)
	}
	return snap, nil
}

// MaxSeqOfSale returns the highest reservation seq Postgres holds for a sale.
func (d *DB) MaxSeqOfSale(ctx context.Context, saleID int64) (int64, error) {
	var n int64
	err := d.g.WithContext(ctx).Raw(`SELECT coalesce(max(max_seq), 0) FROM items WHERE sale_id = ?`, saleID).Scan(&n).Error
	if err != nil {
		return 0, fmt.Errorf("max seq(sale %d): %w", saleID, err)
	}
	return n, nil
}

// ItemFacts are Postgres's counts of one item, for reconciliation and the merchant's view.
type ItemFacts struct {
	ItemID     int64
	Name       string
	Quantity   int64
	Sold       int64
	Pending    int64
	Paid       int64
	Expired    int64
	Cancelled  int64
	Failed     int64
	DupHolders int64 // shoppers holding more than one live order of the item
	MaxSeq     int64
}

// SaleFacts is Postgres's side of a sale's reconciliation.
type SaleFacts struct {
	SaleID        int64
	PurchaseLimit string
	Items         []ItemFacts
	// shoppers holding live orders of more than one item (a violation under a per-sale limit)
	SaleDupHolders int64
	LiveMembers    int64         // distinct buyers-hash members the live orders name
	Returns        []StockReturn // not yet confirmed by Redis
}

// LiveOrder is a PENDING or PAID order.
type LiveOrder struct {
	ID     string
	ItemID int64
	UserID int64
}

// LiveOrders lists a sale's PENDING and PAID orders.
func (d *DB) LiveOrders(ctx context.Context, saleID int64) ([]LiveOrder, error) {
	var out []LiveOrder
	err := d.g.WithContext(ctx).Raw(`SELECT id::text AS id, item_id, user_id FROM orders WHERE sale_id = ? AND status IN ('PENDING','PAID')`, saleID).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("live orders(sale %d): %w", saleID, err)
	}
	return out, nil
}

// SaleFacts reads a sale's counts in one repeatable-read snapshot.
func (d *DB) SaleFacts(ctx context.Context, saleID int64) (SaleFacts, error) {
	f := SaleFacts{SaleID: saleID}
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Raw(`SELECT purchase_limit FROM sales WHERE id = ?`, saleID).Scan(&f.PurchaseLimit).Error; err != nil {
			return err
		}
		if f.PurchaseLimit == "" {
			return ErrNotFound
		}
		if err := tx.Raw(`SELECT i.id AS item_id, i.name, i.quantity, i.sold, i.max_seq,
				count(o.id) FILTER (WHERE o.status = 'PENDING') AS pending,
				count(o.id) FILTER (WHERE o.status = 'PAID') AS paid,
				count(o.id) FILTER (WHERE o.status = 'EXPIRED') AS expired,
				count(o.id) FILTER (WHERE o.status = 'CANCELLED') AS cancelled,
				count(o.id) FILTER (WHERE o.status = 'FAILED') AS failed,
				(SELECT count(*) FROM (SELECT user_id FROM orders d WHERE d.item_id = i.id AND d.status IN ('PENDING','PAID')
					GROUP BY user_id HAVING count(*) > 1) x) AS dup_holders
			FROM items i LEFT JOIN orders o ON o.item_id = i.id
			WHERE i.sale_id = ? GROUP BY i.id ORDER BY i.position`, saleID).Scan(&f.Items).Error; err != nil {
			return err
		}
		if err := tx.Raw(`SELECT count(*) FROM (SELECT user_id FROM orders WHERE sale_id = ? AND status IN ('PENDING','PAID')
				GROUP BY user_id HAVING count(*) > 1) x`, saleID).Scan(&f.SaleDupHolders).Error; err != nil {
			return err
		}
		if err := tx.Raw(`SELECT count(DISTINCT CASE WHEN ? = 'per-item' THEN item_id::text || ':' || user_id::text ELSE user_id::text END)
			FROM orders WHERE sale_id = ? AND status IN ('PENDING','PAID')`, f.PurchaseLimit, saleID).Scan(&f.LiveMembers).Error; err != nil {
			return err
		}
		return tx.Raw(`SELECT order_id::text AS order_id, sale_id, item_id, user_id, reason FROM stock_returns WHERE sale_id = ?`, saleID).Scan(&f.Returns).Error
	}, repeatableRead)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return SaleFacts{}, ErrNotFound
		}
		return SaleFacts{}, fmt.Errorf("sale facts %d: %w", saleID, err)
	}
	return f, nil
}

// EditedSince reports whether the sale's fields Redis holds (start, end, limit, pause, the items
// and their quantities) differ now from what snap read: an edit committed after the snapshot.
func (d *DB) EditedSince(ctx context.Context, snap Snapshot) (bool, error) {
	var sale struct {
		PurchaseLimit string
		StartsAt      time.Time
		EndsAt        time.Time
		Paused        bool
	}
	if err := d.g.WithContext(ctx).Raw(`SELECT purchase_limit, starts_at, ends_at, paused FROM sales WHERE id = ?`, snap.SaleID).
		Scan(&sale).Error; err != nil {
		return false, err
	}
	var items []struct {
		ID       int64
		Quantity int64
	}
	if err := d.g.WithContext(ctx).Raw(`SELECT id, quantity FROM items WHERE sale_id = ?`, snap.SaleID).Scan(&items).Error; err != nil {
		return false, err
	}
	if sale.PurchaseLimit != snap.Limit || !sale.StartsAt.Equal(snap.StartsAt) || !sale.EndsAt.Equal(snap.EndsAt) ||
		sale.Paused != snap.Paused || len(items) != len(snap.Quantity) {
		return true, nil
	}
	for _, it := range items {
		if q, ok := snap.Quantity[it.ID]; !ok || q != it.Quantity {
			return true, nil
		}
	}
	return false, nil
}
