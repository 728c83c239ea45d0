package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"

	"github.com/flashsale/flashsale/migrations"
)

// The migrations are pressly/goose SQL migrations (migrations/*.sql, embedded), recorded in
// goose's table goose_db_version. They run under a Postgres session-level advisory lock, so N
// instances starting at once on a fresh database apply each migration exactly once: one takes
// the lock and applies, the others wait for it and find nothing left to do.
const (
	// migrationTable is goose's version table.
	migrationTable = goose.DefaultTablename
	// legacyMigrationTable is the table of the hand-written runner that preceded goose: a row per
	// applied file name. A database it migrated is adopted (see adoptLegacy); it is left in place
	// but no longer read once goose_db_version exists.
	legacyMigrationTable = "schema_migrations"
	// migrationLockID is the advisory lock of migrations: the one the old runner took, so that an
	// old binary and a new one starting together during an upgrade exclude each other too.
	migrationLockID = 7303001
)

// MigrationState is where one migration stands in a database.
type MigrationState struct {
	Version   int64
	Name      string    // the file name, e.g. 001_init.sql
	Applied   bool      // false: pending
	AppliedAt time.Time // when it was applied (as recorded; zero when pending)
}

// Migrate applies the embedded SQL migrations not applied yet, each in its own transaction, under
// an advisory lock so several instances starting together apply each exactly once. A database
// migrated by the hand-written runner that preceded goose is adopted first, without running its
// SQL again.
func (d *DB) Migrate(ctx context.Context, log *slog.Logger) error {
	sqlDB, err := d.g.DB()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := adoptLegacy(ctx, sqlDB, log); err != nil {
		return fmt.Errorf("migrate: adopt %s: %w", legacyMigrationTable, err)
	}
	p, err := newMigrationProvider(sqlDB)
	if err != nil {
		return err
	}
	results, err := p.Up(ctx)
	for _, r := range results {
		if log != nil && r.Error == nil {
			log.Info("migration applied", "version", r.Source.Version, "name", path.Base(r.Source.Path), "took", r.Duration.Round(time.Millisecond))
		}
	}
	if err != nil {
		var pe *goose.PartialError
		if errors.As(err, &pe) && pe.Failed != nil {
			return fmt.Errorf("migrate %s: %w", path.Base(pe.Failed.Source.Path), pe.Err)
		}
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// MigrationStatus lists every embedded migration in version order with where the database stands:
// applied (and when) or pending. It changes nothing: a database still recorded only in the old
// runner's table is reported from that table.
func (d *DB) MigrationStatus(ctx context.Context) ([]MigrationState, error) {
	sqlDB, err := d.g.DB()
	if err != nil {
		return nil, err
	}
	p, err := newMigrationProvider(sqlDB)
	if err != nil {
		return nil, err
	}
	var states []MigrationState
	for _, s := range p.ListSources() {
		states = append(states, MigrationState{Version: s.Version, Name: path.Base(s.Path)})
	}
	hasGoose, err := tableExists(ctx, sqlDB, migrationTable)
	if err != nil {
		return nil, err
	}
	if hasGoose {
		st, err := p.Status(ctx)
		if err != nil {
			return nil, fmt.Errorf("migration status: %w", err)
		}
		applied := map[int64]time.Time{}
		for _, s := range st {
			if s.State == goose.StateApplied {
				applied[s.Source.Version] = s.AppliedAt
			}
		}
		for i := range states {
			states[i].AppliedAt, states[i].Applied = applied[states[i].Version]
		}
		return states, nil
	}
	legacy, err := legacyVersions(ctx, sqlDB)
	if err != nil {
		return nil, err
	}
	for i := range states {
		states[i].AppliedAt, states[i].Applied = legacy[states[i].Version]
	}
	return states, nil
}

func newMigrationProvider(db *sql.DB) (*goose.Provider, error) {
	// Waiting instances poll the lock every second, for up to five minutes.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID), lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
	)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return p, nil
}

// adoptLegacy records in goose's table the migrations that the hand-written runner applied
// (schema_migrations), when goose's table does not exist yet, so that goose does not run them
// again. It holds the migration lock meanwhile: instances starting together adopt once.
func adoptLegacy(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrationLockID); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLockID)
	hasGoose, err := tableExists(ctx, conn, migrationTable)
	if err != nil || hasGoose {
		return err
	}
	legacy, err := legacyVersions(ctx, conn)
	if err != nil || len(legacy) == 0 {
		return err
	}
	st, err := database.NewStore(goose.DialectPostgres, migrationTable)
	if err != nil {
		return err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := st.CreateVersionTable(ctx, tx); err != nil {
		return err
	}
	if err := st.Insert(ctx, tx, database.InsertRequest{Version: 0}); err != nil {
		return err
	}
	versions := slices.Sorted(maps.Keys(legacy))
	for _, v := range versions {
		// tstamp is a timestamp without time zone that goose fills with now(): the same
		// conversion keeps the old runner's applied_at.
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+migrationTable+` (version_id, is_applied, tstamp) VALUES ($1, true, $2::timestamptz::timestamp)`,
			v, legacy[v]); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if log != nil {
		log.Info("migrations: adopted the database of the old runner", "table", legacyMigrationTable, "versions", len(versions))
	}
	return nil
}

// legacyVersions reads the old runner's table: version → applied_at; empty when there is none.
func legacyVersions(ctx context.Context, q querier) (map[int64]time.Time, error) {
	exists, err := tableExists(ctx, q, legacyMigrationTable)
	if err != nil || !exists {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, `SELECT version, applied_at FROM `+legacyMigrationTable)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]time.Time{}
	for rows.Next() {
		var name string
		var at time.Time
		if err := rows.Scan(&name, &at); err != nil {
			return nil, err
		}
		v, err := fileVersion(name)
		if err != nil {
			return nil, fmt.Errorf("%s holds %q: %w", legacyMigrationTable, name, err)
		}
		out[v] = at
	}
	return out, rows.Err()
}

// fileVersion is the version goose reads from a migration's file name: its leading number.
func fileVersion(name string) (int64, error) {
	num, _, ok := strings.Cut(path.Base(name), "_")
	v, err := strconv.ParseInt(num, 10, 64)
	if !ok || err != nil || v < 1 {
		return 0, errors.New("not a migration file name (NNN_name.sql)")
	}
	return v, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// tableExists reports whether the table exists in the schemas on the search path.
func tableExists(ctx context.Context, q querier, name string) (bool, error) {
	var exists bool
	err := q.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&exists)
	return exists, err
}
