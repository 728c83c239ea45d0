package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Errors the database layer reports in domain terms.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrNoRoom   = errors.New("no room left for the order")
	ErrRefused  = errors.New("refused by a database constraint")
)

// saleRow is a row of sales; it never leaves this package (rows.go converts it to and from shop.Sale).
type saleRow struct {
	ID         int64
	MerchantID int64
	Name       string
	StartsAt   time.Time
	EndsAt     time.Time
	CreatedAt  time.Time
	// Rate limits of this sale's purchase path, requests per second; nil means the defaults.
	UserRatePerSec       *int
	IPRatePerSec         *int
	PaymentWindowSeconds int
	PurchaseLimit        string // shop.LimitPerSale or shop.LimitPerItem
	Currency             string
	Description          *string    // optional, at most 2,000 characters
	Paused               bool       // purchases and purchase tokens answer 503 PAUSED
	StockShards          int        // the Redis stock shards of the sale, fixed at its creation (0 on create: 1)
	FairStartMillis      int        // the fair start's draw window (0: none)
	DrawClosedAt         *time.Time `gorm:"->"`        // written by CloseDraw only
	DrawSeed             []byte     `gorm:"<-:create"` // drawn at creation (CreateSale), never changed
	DrawPauses           int        `gorm:"->"`        // counted by EditSale
	RedisEpoch           int64      `gorm:"->"`        // bumped by rebuilds only
	DrillOf              *int64     // a fire drill's scratch copy of that sale (store/drill.go); nil: a real sale
	Items                []itemRow  `gorm:"foreignKey:SaleID"`
}

// itemRow is a row of items: one product of a sale with its quantity and units sold.
type itemRow struct {
	ID         int64
	SaleID     int64
	Position   int
	Name       string
	PriceCents int64
	Quantity   int
	Sold       int
	ImageURL   *string // optional, https only
	MaxSeq     int64   `gorm:"->"` // written by the writer only
}

// DB is the Postgres store, the source of truth.
type DB struct {
	g      *gorm.DB
	shards sync.Map // sale id -> its stock shards (fixed once the sale exists)
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

// Gorm exposes the program's own connection to the few tests that watch what the program itself
// sends and holds (its statements, its pool) and to this package's tests; a test that only reads
// or changes the source of truth opens its own connection (testenv.SQL). No program code outside
// this package uses it.
func (d *DB) Gorm() *gorm.DB { return d.g }

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
func (d *DB) CreateUser(ctx context.Context, u *shop.User) error {
	err := d.g.WithContext(ctx).Create(u).Error
	if isUniqueViolation(err) {
		return ErrConflict
	}
	if err != nil {
		return fmt.Errorf("create user %q: %w", u.Username, err)
	}
	return nil
}

// UsernameByID returns a user's username (ErrNotFound when the id is unknown: the identity
// provider may be external).
func (d *DB) UsernameByID(ctx context.Context, id int64) (string, error) {
	var name string
	err := d.g.WithContext(ctx).Raw(`SELECT username FROM users WHERE id = ?`, id).Scan(&name).Error
	if err != nil {
		return "", fmt.Errorf("user %d: %w", id, err)
	}
	if name == "" {
		return "", ErrNotFound
	}
	return name, nil
}

// UserByName finds a user by username, case-insensitively (the unique index users_username_lower).
func (d *DB) UserByName(ctx context.Context, name string) (shop.User, error) {
	var u shop.User
	err := d.g.WithContext(ctx).Where("lower(username) = lower(?)", name).Take(&u).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return shop.User{}, ErrNotFound
	}
	if err != nil {
		return shop.User{}, fmt.Errorf("user %q: %w", name, err)
	}
	return u, nil
}

// CreateSale inserts a sale and its items (positions in the order given) in one transaction, and
// returns it as stored, ids set.
//
// Every sale gets a seed of its own for its draw, drawn here (a drill's copy too: it must never
// reveal the seed of the sale it copies).
func (d *DB) CreateSale(ctx context.Context, sale shop.Sale) (shop.Sale, error) {
	s := saleRowOf(sale)
	s.DrawSeed = shop.NewDrawSeed()
	if s.StockShards < 1 {
		s.StockShards = 1
	}
	for i := range s.Items {
		s.Items[i].Position = i
	}
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return tx.Create(&s).Error
	})
	if err != nil {
		return shop.Sale{}, fmt.Errorf("create sale: %w", err)
	}
	return s.business(), nil
}

// SaleByID loads a sale with its items in position order.
func (d *DB) SaleByID(ctx context.Context, id int64) (shop.Sale, error) {
	var s saleRow
	err := d.g.WithContext(ctx).Preload("Items", func(db *gorm.DB) *gorm.DB { return db.Order("position") }).Take(&s, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return shop.Sale{}, ErrNotFound
	}
	if err != nil {
		return shop.Sale{}, fmt.Errorf("sale %d: %w", id, err)
	}
	return s.business(), nil
}

// SalesEndingAfter lists the sales not ended at t, soonest first, with their items: a page of at
// most limit after the cursor (nil: from the first); next is nil on the last page. A fire drill's
// scratch copy is not listed (EachSaleEndingAfter, the background jobs' walk, has them).
func (d *DB) SalesEndingAfter(ctx context.Context, t time.Time, after *shop.SaleCursor, limit int) ([]shop.Sale, *shop.SaleCursor, error) {
	return d.salesEndingAfter(ctx, t, after, limit, false)
}

func (d *DB) salesEndingAfter(ctx context.Context, t time.Time, after *shop.SaleCursor, limit int, drills bool) ([]shop.Sale, *shop.SaleCursor, error) {
	var out []saleRow
	q := d.g.WithContext(ctx).Preload("Items", func(db *gorm.DB) *gorm.DB { return db.Order("position") }).
		Where("ends_at > ?", t)
	if !drills {
		q = q.Where("drill_of IS NULL")
	}
	if after != nil {
		q = q.Where("(starts_at, id) > (?, ?)", after.StartsAt, after.ID)
	}
	err := q.Order("starts_at, id").Limit(limit + 1).Find(&out).Error
	if err != nil {
		return nil, nil, fmt.Errorf("sales: %w", err)
	}
	if len(out) <= limit {
		return salesOf(out), nil, nil
	}
	out = out[:limit]
	last := out[limit-1]
	return salesOf(out), &shop.SaleCursor{StartsAt: last.StartsAt, ID: last.ID}, nil
}

// SalesEndedBy lists the sales ended at t, the latest end first, with their items: a page of at
// most limit after the cursor (nil: from the first; its time is the end of the last sale of the
// page before); next is nil on the last page. A fire drill's scratch copy is not listed.
func (d *DB) SalesEndedBy(ctx context.Context, t time.Time, after *shop.SaleCursor, limit int) ([]shop.Sale, *shop.SaleCursor, error) {
	var out []saleRow
	q := d.g.WithContext(ctx).Preload("Items", func(db *gorm.DB) *gorm.DB { return db.Order("position") }).
		Where("ends_at <= ? AND drill_of IS NULL", t)
	if after != nil {
		q = q.Where("(ends_at, id) < (?, ?)", after.StartsAt, after.ID)
	}
	err := q.Order("ends_at DESC, id DESC").Limit(limit + 1).Find(&out).Error
	if err != nil {
		return nil, nil, fmt.Errorf("ended sales: %w", err)
	}
	if len(out) <= limit {
		return salesOf(out), nil, nil
	}
	out = out[:limit]
	last := out[limit-1]
	return salesOf(out), &shop.SaleCursor{StartsAt: last.EndsAt, ID: last.ID}, nil
}

// EachSaleEndingAfter calls fn with every sale not ended at t, a page at a time: a fire drill's
// scratch copy too (the keeper serves it as any sale while the drill runs).
func (d *DB) EachSaleEndingAfter(ctx context.Context, t time.Time, fn func([]shop.Sale) error) error {
	var after *shop.SaleCursor
	for {
		page, next, err := d.salesEndingAfter(ctx, t, after, 500, true)
		if err != nil {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		if next == nil {
			return nil
		}
		after = next
	}
}

// SalesByMerchant lists a merchant's sales, newest first (a fire drill's scratch copies are not).
func (d *DB) SalesByMerchant(ctx context.Context, merchantID int64, limit int) ([]shop.Sale, error) {
	var out []saleRow
	err := d.g.WithContext(ctx).Where("merchant_id = ? AND drill_of IS NULL", merchantID).Order("id DESC").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("sales of merchant %d: %w", merchantID, err)
	}
	return salesOf(out), nil
}

// ItemByID loads one item.
func (d *DB) ItemByID(ctx context.Context, id int64) (shop.Item, error) {
	var it itemRow
	err := d.g.WithContext(ctx).Take(&it, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return shop.Item{}, ErrNotFound
	}
	if err != nil {
		return shop.Item{}, fmt.Errorf("item %d: %w", id, err)
	}
	return it.business(), nil
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

// repeatableRead runs a transaction in one snapshot.
var repeatableRead = &sql.TxOptions{Isolation: sql.LevelRepeatableRead}
