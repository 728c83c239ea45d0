package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/flashsale/flashsale/migrations"
)

// Errors the database layer reports in domain terms.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrNoRoom   = errors.New("no room left for the order")
	ErrRefused  = errors.New("refused by a database constraint")
)

// Order statuses stored in Postgres (QUEUED lives only in Redis and the queue).
const (
	StatusPending   = "PENDING"
	StatusPaid      = "PAID"
	StatusExpired   = "EXPIRED"
	StatusCancelled = "CANCELLED"
	StatusFailed    = "FAILED"
)

// User is a row of users.
type User struct {
	ID           int64
	Username     string
	PasswordHash string
	Role         string
	CreatedAt    time.Time
}

// Sale is a row of sales.
type Sale struct {
	ID         int64
	MerchantID int64
	Name       string
	StartsAt   time.Time
	EndsAt     time.Time
	CreatedAt  time.Time
	// Rate limits of this sale's purchase path, requests per second; nil means the defaults.
	UserRatePerSec *int
	IPRatePerSec   *int
	Items          []Item `gorm:"foreignKey:SaleID"`
}

// Item is a row of items: one product of a sale with its quantity and units sold.
type Item struct {
	ID         int64
	SaleID     int64
	Position   int
	Name       string
	PriceCents int64
	Quantity   int
	Sold       int
}

// Order is a row of orders.
type Order struct {
	ID         string
	ItemID     int64
	UserID     int64
	Status     string
	ReservedAt time.Time
	CreatedAt  time.Time
	PayBy      time.Time
	PaidAt     *time.Time
	Failure    *string
}

// DB is the Postgres store, the source of truth.
type DB struct {
	g *gorm.DB
}

// OpenDB connects to Postgres at dsn with a pool of at most maxConns connections.
func OpenDB(ctx context.Context, dsn string, maxConns int) (*DB, error) {
	g, err := gorm.Open(postgres.Open(dsn), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		PrepareStmt:            false,
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	sqlDB, err := g.DB()
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if maxConns <= 0 {
		maxConns = 16
	}
	sqlDB.SetMaxOpenConns(maxConns)
	sqlDB.SetMaxIdleConns(maxConns)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(pctx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return &DB{g: g}, nil
}

// Close closes the pool.
func (d *DB) Close() error {
	sqlDB, err := d.g.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Gorm exposes the connection for tests and tools that check the source of truth directly.
func (d *DB) Gorm() *gorm.DB { return d.g }

// Migrate applies the embedded SQL migrations not applied yet, each in its own transaction, under
// an advisory lock so several instances starting together apply each exactly once.
func (d *DB) Migrate(ctx context.Context, log *slog.Logger) error {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	sort.Strings(names)
	return d.g.WithContext(ctx).Connection(func(c *gorm.DB) error {
		if err := c.Exec(`SELECT pg_advisory_lock(7303001)`).Error; err != nil {
			return fmt.Errorf("migrate lock: %w", err)
		}
		defer c.Exec(`SELECT pg_advisory_unlock(7303001)`)
		if err := c.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`).Error; err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		var done []string
		if err := c.Raw(`SELECT version FROM schema_migrations`).Scan(&done).Error; err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		applied := map[string]bool{}
		for _, v := range done {
			applied[v] = true
		}
		for _, name := range names {
			if applied[name] {
				continue
			}
			sql, err := fs.ReadFile(migrations.FS, name)
			if err != nil {
				return fmt.Errorf("migrate %s: %w", name, err)
			}
			err = c.Transaction(func(tx *gorm.DB) error {
				if err := tx.Exec(string(sql)).Error; err != nil {
					return err
				}
				return tx.Exec(`INSERT INTO schema_migrations (version) VALUES (?)`, name).Error
			})
			if err != nil {
				return fmt.Errorf("migrate %s: %w", name, err)
			}
			if log != nil {
				log.Info("migration applied", "version", name)
			}
		}
		return nil
	})
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// isConstraint reports whether Postgres refused a row for its content (a constraint), as opposed
// to being unreachable or overloaded.
func isConstraint(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && strings.HasPrefix(pe.Code, "23")
}

// CreateUser inserts a user; a taken username is ErrConflict.
func (d *DB) CreateUser(ctx context.Context, u *User) error {
	err := d.g.WithContext(ctx).Create(u).Error
	if isUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("create user %q: %w", u.Username, err)
	}
	return nil
}

// UserByName finds a user by username.
func (d *DB) UserByName(ctx context.Context, name string) (User, error) {
	var u User
	err := d.g.WithContext(ctx).Where("username = ?", name).Take(&u).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return User{}, ErrNotFound
	}
	if err != nil {
		return User{}, fmt.Errorf("user %q: %w", name, err)
	}
	return u, nil
}

// CreateSale inserts a sale and its items (positions in the order given) in one transaction.
func (d *DB) CreateSale(ctx context.Context, s *Sale) error {
	for i := range s.Items {
		s.Items[i].Position = i
	}
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return tx.Create(s).Error
	})
	if err != nil {
		return fmt.Errorf("create sale: %w", err)
	}
	return nil
}

// SaleByID loads a sale with its items in position order.
func (d *DB) SaleByID(ctx context.Context, id int64) (Sale, error) {
	var s Sale
	err := d.g.WithContext(ctx).Preload("Items", func(db *gorm.DB) *gorm.DB { return db.Order("position") }).Take(&s, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Sale{}, ErrNotFound
	}
	if err != nil {
		return Sale{}, fmt.Errorf("sale %d: %w", id, err)
	}
	return s, nil
}

// SalesEndingAfter lists the sales not ended at t, soonest first, with their items.
func (d *DB) SalesEndingAfter(ctx context.Context, t time.Time, limit int) ([]Sale, error) {
	var out []Sale
	err := d.g.WithContext(ctx).Preload("Items", func(db *gorm.DB) *gorm.DB { return db.Order("position") }).
		Where("ends_at > ?", t).Order("starts_at, id").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("sales: %w", err)
	}
	return out, nil
}

// SalesByMerchant lists a merchant's sales, newest first.
func (d *DB) SalesByMerchant(ctx context.Context, merchantID int64, limit int) ([]Sale, error) {
	var out []Sale
	err := d.g.WithContext(ctx).Where("merchant_id = ?", merchantID).Order("id DESC").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("sales of merchant %d: %w", merchantID, err)
	}
	return out, nil
}

// ItemByID loads one item.
func (d *DB) ItemByID(ctx context.Context, id int64) (Item, error) {
	var it Item
	err := d.g.WithContext(ctx).Take(&it, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Item{}, ErrNotFound
	}
	if err != nil {
		return Item{}, fmt.Errorf("item %d: %w", id, err)
	}
	return it, nil
}

// LiveBuyers lists the users holding a live order (PENDING or PAID) of an item.
func (d *DB) LiveBuyers(ctx context.Context, itemID int64) ([]int64, error) {
	var ids []int64
	err := d.g.WithContext(ctx).Raw(`SELECT user_id FROM orders WHERE item_id = ? AND status IN ('PENDING','PAID')`, itemID).Scan(&ids).Error
	if err != nil {
		return nil, fmt.Errorf("live buyers(item %d): %w", itemID, err)
	}
	return ids, nil
}

// NewOrder is an order the writer inserts: a reservation Redis granted and the queue delivered.
type NewOrder struct {
	ID         string
	ItemID     int64
	UserID     int64
	ReservedAt time.Time
	PayBy      time.Time
}

// pgArray holds values to send as one Postgres array literal, so one statement carries a whole
// batch; GORM would expand a Go slice into a list of placeholders.
type pgArray []string

func (a pgArray) literal() string { return "{" + strings.Join(a, ",") + "}" }

// InsertOrders writes a batch of new orders as PENDING in ONE statement (so one round trip and
// one implicit transaction): the rows with INSERT … ON CONFLICT DO NOTHING, and sold = sold + n
// for each item from the rows actually inserted, which the CHECK (sold <= quantity) guards. It
// returns the ids inserted (an id already present, a redelivery, or a second live order of the
// same shopper is skipped). If an item has no room for its rows the whole statement rolls back
// with ErrNoRoom; another constraint refusal is ErrRefused.
func (d *DB) InsertOrders(ctx context.Context, orders []NewOrder) ([]string, error) {
	if len(orders) == 0 {
		return nil, nil
	}
	ids := make(pgArray, len(orders))
	items := make(pgArray, len(orders))
	users := make(pgArray, len(orders))
	reserved := make(pgArray, len(orders))
	payBy := make(pgArray, len(orders))
	for i, o := range orders {
		ids[i] = o.ID
		items[i] = strconv.FormatInt(o.ItemID, 10)
		users[i] = strconv.FormatInt(o.UserID, 10)
		reserved[i] = `"` + o.ReservedAt.UTC().Format(time.RFC3339Nano) + `"`
		payBy[i] = `"` + o.PayBy.UTC().Format(time.RFC3339Nano) + `"`
	}
	var inserted []string
	err := d.g.WithContext(ctx).Raw(`WITH ins AS (
			INSERT INTO orders (id, item_id, user_id, status, reserved_at, pay_by)
			SELECT u.id, u.item_id, u.user_id, 'PENDING', u.reserved_at, u.pay_by
			FROM unnest(?::uuid[], ?::bigint[], ?::bigint[], ?::timestamptz[], ?::timestamptz[])
			     AS u(id, item_id, user_id, reserved_at, pay_by)
			ON CONFLICT DO NOTHING
			RETURNING id, item_id
		), per_item AS (
			SELECT item_id, count(*) AS n FROM ins GROUP BY item_id
		), upd AS (
			UPDATE items SET sold = items.sold + per_item.n FROM per_item WHERE items.id = per_item.item_id
			RETURNING items.id
		)
		SELECT id::text FROM ins`, ids.literal(), items.literal(), users.literal(), reserved.literal(), payBy.literal()).Scan(&inserted).Error
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

// InsertFailedOrder records an order the database refused as FAILED, so its shopper sees why.
// A second call for the same id changes nothing.
func (d *DB) InsertFailedOrder(ctx context.Context, o NewOrder, reason string) error {
	err := d.g.WithContext(ctx).Exec(`INSERT INTO orders (id, item_id, user_id, status, reserved_at, pay_by, failure)
		VALUES (?, ?, ?, 'FAILED', ?, ?, ?) ON CONFLICT (id) DO NOTHING`, o.ID, o.ItemID, o.UserID, o.ReservedAt, o.PayBy, reason).Error
	if err != nil {
		return fmt.Errorf("record failed order %s: %w", o.ID, err)
	}
	return nil
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

// PayOrder marks a PENDING order of userID as PAID if its payment window is still open at now.
// It reports whether this call changed it; the caller reads the order to tell why not.
func (d *DB) PayOrder(ctx context.Context, id string, userID int64, now time.Time) (bool, error) {
	res := d.g.WithContext(ctx).Exec(`UPDATE orders SET status = 'PAID', paid_at = ?
		WHERE id = ?::uuid AND user_id = ? AND status = 'PENDING' AND pay_by > ?`, now, id, userID, now)
	if res.Error != nil {
		return false, fmt.Errorf("pay order %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// ItemCounts are the Postgres facts of one item for the merchant's dashboard and the checker.
type ItemCounts struct {
	ItemID   int64
	Name     string
	Quantity int
	Sold     int
	Pending  int
	Paid     int
}

// SaleCounts returns the counts of every item of a sale, in position order.
func (d *DB) SaleCounts(ctx context.Context, saleID int64) ([]ItemCounts, error) {
	var out []ItemCounts
	err := d.g.WithContext(ctx).Raw(`SELECT i.id AS item_id, i.name, i.quantity, i.sold,
			count(o.id) FILTER (WHERE o.status = 'PENDING') AS pending,
			count(o.id) FILTER (WHERE o.status = 'PAID') AS paid
		FROM items i LEFT JOIN orders o ON o.item_id = i.id
		WHERE i.sale_id = ? GROUP BY i.id ORDER BY i.position`, saleID).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("sale counts %d: %w", saleID, err)
	}
	return out, nil
}
