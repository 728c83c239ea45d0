package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/flashsale/flashsale/shop"
)

// The fire drill's storage (services/drill): its row in drills, its scratch copy of a sale
// (a row of sales marked drill_of, migrations/009_drill.sql) and the removal of everything the
// copy left in Postgres and Redis.

// DrillRecord is one drill as Postgres keeps it.
type DrillRecord struct {
	ID            int64
	SaleID        int64 // the merchant's sale the drill copies
	MerchantID    int64
	CopySaleID    int64 // the scratch copy while it exists; 0: none (yet, or any more)
	Phase         string
	Shoppers      int
	Seconds       int
	ExpectedCrowd int64
	CrowdSource   string
	Instance      string
	StartedAt     time.Time
	HeartbeatAt   time.Time
	FinishedAt    *time.Time
	Sent          int
	Answered      int
	Result        []byte // JSON, as services/drill wrote it; nil until done
	Failure       string
}

// drillRow is a row of drills.
type drillRow struct {
	ID            int64
	SaleID        int64
	MerchantID    int64
	CopySaleID    *int64
	Phase         string
	Shoppers      int
	Seconds       int
	ExpectedCrowd int64
	CrowdSource   string
	Instance      string
	StartedAt     time.Time `gorm:"default:now()"`
	HeartbeatAt   time.Time `gorm:"default:now()"`
	FinishedAt    *time.Time
	Sent          int
	Answered      int
	Result        *string
	Failure       *string
}

func (drillRow) TableName() string { return "drills" }

func (r drillRow) record() DrillRecord {
	d := DrillRecord{ID: r.ID, SaleID: r.SaleID, MerchantID: r.MerchantID, Phase: r.Phase, Shoppers: r.Shoppers, Seconds: r.Seconds,
		ExpectedCrowd: r.ExpectedCrowd, CrowdSource: r.CrowdSource, Instance: r.Instance, StartedAt: r.StartedAt,
		HeartbeatAt: r.HeartbeatAt, FinishedAt: r.FinishedAt, Sent: r.Sent, Answered: r.Answered}
	if r.CopySaleID != nil {
		d.CopySaleID = *r.CopySaleID
	}
	if r.Result != nil {
		d.Result = []byte(*r.Result)
	}
	if r.Failure != nil {
		d.Failure = *r.Failure
	}
	return d
}

// SalesLiveOrStarting lists the real sales (not drill copies) live at now or starting before
// now+within, soonest first, without their items: at most limit of them.
func (d *DB) SalesLiveOrStarting(ctx context.Context, now time.Time, within time.Duration, limit int) ([]shop.Sale, error) {
	var out []saleRow
	err := d.g.WithContext(ctx).Select("id", "merchant_id", "name", "starts_at", "ends_at", "paused").
		Where("drill_of IS NULL AND ends_at > ? AND starts_at < ?", now, now.Add(within)).
		Order("starts_at, id").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("sales live or starting: %w", err)
	}
	return salesOf(out), nil
}

// InsertDrill records a new drill as running (finished_at NULL). Another drill still running on
// the deployment is ErrConflict (the unique index drills_one_running).
func (d *DB) InsertDrill(ctx context.Context, r DrillRecord) (DrillRecord, error) {
	row := drillRow{SaleID: r.SaleID, MerchantID: r.MerchantID, Phase: r.Phase, Shoppers: r.Shoppers, Seconds: r.Seconds,
		ExpectedCrowd: r.ExpectedCrowd, CrowdSource: r.CrowdSource, Instance: r.Instance}
	err := d.g.WithContext(ctx).Omit("StartedAt", "HeartbeatAt", "CopySaleID", "FinishedAt", "Result", "Failure").Create(&row).Error
	if isUniqueViolation(err) {
		return DrillRecord{}, ErrConflict
	}
	if err != nil {
		return DrillRecord{}, fmt.Errorf("insert drill: %w", err)
	}
	return d.Drill(ctx, row.ID)
}

// Drill reads one drill.
func (d *DB) Drill(ctx context.Context, id int64) (DrillRecord, error) {
	var row drillRow
	err := d.g.WithContext(ctx).Take(&row, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return DrillRecord{}, ErrNotFound
	}
	if err != nil {
		return DrillRecord{}, fmt.Errorf("drill %d: %w", id, err)
	}
	return row.record(), nil
}

// LatestDrill reads the last drill of a sale (ErrNotFound: none yet).
func (d *DB) LatestDrill(ctx context.Context, saleID int64) (DrillRecord, error) {
	var rows []drillRow
	if err := d.g.WithContext(ctx).Where("sale_id = ?", saleID).Order("id DESC").Limit(1).Find(&rows).Error; err != nil {
		return DrillRecord{}, fmt.Errorf("drills of sale %d: %w", saleID, err)
	}
	if len(rows) == 0 {
		return DrillRecord{}, ErrNotFound
	}
	return rows[0].record(), nil
}

// RunningDrills lists the drills not finished (at most one, by the unique index).
func (d *DB) RunningDrills(ctx context.Context) ([]DrillRecord, error) {
	var rows []drillRow
	if err := d.g.WithContext(ctx).Where("finished_at IS NULL").Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("running drills: %w", err)
	}
	out := make([]DrillRecord, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// DrillEnd is when a merchant's last drill ended, and how long ago, both on Postgres's clock.
type DrillEnd struct {
	At  time.Time
	Ago time.Duration
}

// LastDrillEnd reads when the merchant's last finished drill ended (any of its sales, done,
// failed or stopped); ErrNotFound: none has.
func (d *DB) LastDrillEnd(ctx context.Context, merchantID int64) (DrillEnd, error) {
	var rows []struct {
		FinishedAt time.Time
		AgoMillis  float64
	}
	err := d.g.WithContext(ctx).Raw(`SELECT finished_at, extract(epoch FROM now() - finished_at) * 1000 AS ago_millis
		FROM drills WHERE merchant_id = ? AND finished_at IS NOT NULL ORDER BY finished_at DESC LIMIT 1`, merchantID).Scan(&rows).Error
	if err != nil {
		return DrillEnd{}, fmt.Errorf("last drill of merchant %d: %w", merchantID, err)
	}
	if len(rows) == 0 {
		return DrillEnd{}, ErrNotFound
	}
	return DrillEnd{At: rows[0].FinishedAt, Ago: time.Duration(rows[0].AgoMillis * float64(time.Millisecond))}, nil
}

// DrillProgress records a running drill's phase and counts, and that its instance is alive
// (heartbeat_at, on Postgres's clock). A drill already finished is left as it is.
func (d *DB) DrillProgress(ctx context.Context, id int64, phase string, sent, answered int) error {
	err := d.g.WithContext(ctx).Exec(`UPDATE drills SET phase = ?, sent = ?, answered = ?, heartbeat_at = now()
		WHERE id = ? AND finished_at IS NULL`, phase, sent, answered, id).Error
	if err != nil {
		return fmt.Errorf("drill %d progress: %w", id, err)
	}
	return nil
}

// SetDrillCopy records the scratch copy of a running drill (0: gone).
func (d *DB) SetDrillCopy(ctx context.Context, id, copySaleID int64) error {
	var v any
	if copySaleID != 0 {
		v = copySaleID
	}
	if err := d.g.WithContext(ctx).Exec(`UPDATE drills SET copy_sale_id = ? WHERE id = ?`, v, id).Error; err != nil {
		return fmt.Errorf("drill %d copy: %w", id, err)
	}
	return nil
}

// FinishDrill ends a drill: done with its result, or failed with the reason. It reports false
// when the drill had finished already (another instance took it over as abandoned).
func (d *DB) FinishDrill(ctx context.Context, id int64, phase string, result []byte, failure string) (bool, error) {
	var res, fail any
	if result != nil {
		res = string(result)
	}
	if failure != "" {
		fail = failure
	}
	tx := d.g.WithContext(ctx).Exec(`UPDATE drills SET phase = ?, result = ?::jsonb, failure = ?, finished_at = now(), heartbeat_at = now()
		WHERE id = ? AND finished_at IS NULL`, phase, res, fail, id)
	if tx.Error != nil {
		return false, fmt.Errorf("finish drill %d: %w", id, tx.Error)
	}
	return tx.RowsAffected == 1, nil
}

// AbandonDrills marks failed, with reason, the running drills whose instance has not been heard
// of for silent (by Postgres's clock): an instance stopped in the middle of one. It returns the
// drills it ended.
func (d *DB) AbandonDrills(ctx context.Context, silent time.Duration, reason string) ([]DrillRecord, error) {
	var rows []drillRow
	err := d.g.WithContext(ctx).Raw(`UPDATE drills SET phase = 'failed', failure = ?, finished_at = now()
		WHERE finished_at IS NULL AND heartbeat_at < now() - ? * interval '1 millisecond' RETURNING *`, reason, silent.Milliseconds()).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("abandon drills: %w", err)
	}
	out := make([]DrillRecord, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// DrillCopies lists the ids of every drill copy Postgres holds.
func (d *DB) DrillCopies(ctx context.Context) ([]int64, error) {
	var ids []int64
	if err := d.g.WithContext(ctx).Raw(`SELECT id FROM sales WHERE drill_of IS NOT NULL ORDER BY id`).Scan(&ids).Error; err != nil {
		return nil, fmt.Errorf("drill copies: %w", err)
	}
	return ids, nil
}

// CreateDrillCopy stores the scratch copy of a sale (copy.DrillOf set) with its items.
func (d *DB) CreateDrillCopy(ctx context.Context, copy shop.Sale) (shop.Sale, error) {
	if copy.DrillOf == 0 {
		return shop.Sale{}, errors.New("create drill copy: the copy names no sale (DrillOf)")
	}
	return d.CreateSale(ctx, copy)
}

// OrdersOfSaleCount counts the orders Postgres holds for a sale, whatever their status.
func (d *DB) OrdersOfSaleCount(ctx context.Context, saleID int64) (int64, error) {
	var n int64
	if err := d.g.WithContext(ctx).Raw(`SELECT count(*) FROM orders WHERE sale_id = ?`, saleID).Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("orders of sale %d: %w", saleID, err)
	}
	return n, nil
}

// DeleteDrillCopy deletes a drill copy with its items, orders and what hangs from them, in one
// transaction. It refuses a sale that is not a drill copy (nothing is deleted). A copy already
// gone is no error.
func (d *DB) DeleteDrillCopy(ctx context.Context, saleID int64) error {
	return d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var of []*int64
		if err := tx.Raw(`SELECT drill_of FROM sales WHERE id = ? FOR UPDATE`, saleID).Scan(&of).Error; err != nil {
			return fmt.Errorf("drill copy %d: %w", saleID, err)
		}
		if len(of) == 0 {
			return nil
		}
		if of[0] == nil {
			return fmt.Errorf("sale %d is not a drill copy: refusing to delete it", saleID)
		}
		for _, q := range []string{
			`DELETE FROM payment_events WHERE order_id IN (SELECT id FROM orders WHERE sale_id = ?)`,
			`DELETE FROM checkouts WHERE order_id IN (SELECT id FROM orders WHERE sale_id = ?)`,
			`DELETE FROM stock_returns WHERE sale_id = ?`,
			`DELETE FROM orders WHERE sale_id = ?`,
			`DELETE FROM item_shard_seqs WHERE item_id IN (SELECT id FROM items WHERE sale_id = ?)`,
			`DELETE FROM items WHERE sale_id = ?`,
			`DELETE FROM sales WHERE id = ? AND drill_of IS NOT NULL`,
		} {
			if err := tx.Exec(q, saleID).Error; err != nil {
				return fmt.Errorf("delete drill copy %d: %w", saleID, err)
			}
		}
		return nil
	})
}

// InFlightCount counts a sale's reservations not yet written to Postgres, over its k shards.
func (s *Stock) InFlightCount(ctx context.Context, saleID int64, k int) (int64, error) {
	var n int64
	for sh := range max(k, 1) {
		c, err := s.rdb.HLen(ctx, InFlightKeyOf(saleID, sh)).Result()
		if err != nil {
			return 0, fmt.Errorf("in flight of sale %d: %w", saleID, err)
		}
		n += c
	}
	return n, nil
}

// SaleKeyPatterns are the SCAN patterns of every Redis key of a sale: its hash tags ({sale:S}
// and its shards' {sale:S:k}) and its rate-limit buckets (limits.Limiter's rl:u:S:… and rl:ip:S:…).
func SaleKeyPatterns(saleID int64) []string {
	id := strconv.FormatInt(saleID, 10)
	return []string{"{sale:" + id + "}*", "{sale:" + id + ":*}*", "rl:u:" + id + ":*", "rl:ip:" + id + ":*"}
}

// SaleKeys lists the Redis keys of a sale (SaleKeyPatterns), on every master of a Redis Cluster.
func (s *Stock) SaleKeys(ctx context.Context, saleID int64) ([]string, error) {
	var mu sync.Mutex
	var out []string
	scan := func(ctx context.Context, c redis.Cmdable) error {
		for _, pat := range SaleKeyPatterns(saleID) {
			it := c.Scan(ctx, 0, pat, 1000).Iterator()
			for it.Next(ctx) {
				mu.Lock()
				out = append(out, it.Val())
				mu.Unlock()
			}
			if err := it.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := s.rdb.(*redis.ClusterClient); ok { // the masters are scanned at once
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, s.rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("keys of sale %d: %w", saleID, err)
	}
	return out, nil
}

// DeleteSaleKeys deletes every Redis key of a sale (SaleKeyPatterns) and returns how many.
func (s *Stock) DeleteSaleKeys(ctx context.Context, saleID int64) (int, error) {
	keys, err := s.SaleKeys(ctx, saleID)
	if err != nil {
		return 0, err
	}
	for _, k := range keys { // one key a command: the keys of a sale span several slots
		if err := s.rdb.Del(ctx, k).Err(); err != nil {
			return 0, fmt.Errorf("delete keys of sale %d: %w", saleID, err)
		}
	}
	return len(keys), nil
}
