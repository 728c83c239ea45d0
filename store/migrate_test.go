package store_test

import (
	"context"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/migrations"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// migrationFiles lists the embedded migrations in order, with their versions.
func migrationFiles(t *testing.T) ([]string, []int64) {
	t.Helper()
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("embedded migrations: %v %v", names, err)
	}
	slices.Sort(names)
	var versions []int64
	for _, n := range names {
		v, err := strconv.ParseInt(n[:strings.IndexByte(n, '_')], 10, 64)
		if err != nil {
			t.Fatalf("migration %s: %v", n, err)
		}
		versions = append(versions, v)
	}
	return names, versions
}

func openDB(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.OpenDB(context.Background(), dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// checkAllApplied checks goose's table holds every version exactly once and the status says so.
func checkAllApplied(t *testing.T, db *store.DB, names []string, versions []int64) {
	t.Helper()
	var rows []struct {
		VersionID int64
		N         int
	}
	if err := db.Gorm().Raw(`SELECT version_id, count(*) AS n FROM goose_db_version WHERE version_id > 0 GROUP BY version_id ORDER BY version_id`).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, r := range rows {
		if r.N != 1 {
			t.Errorf("version %d recorded %d times, want once", r.VersionID, r.N)
		}
		got = append(got, r.VersionID)
	}
	if !slices.Equal(got, versions) {
		t.Errorf("goose_db_version holds versions %v, want %v", got, versions)
	}
	states, err := db.MigrationStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != len(names) {
		t.Fatalf("status lists %d migrations, want %d", len(states), len(names))
	}
	for i, s := range states {
		if s.Version != versions[i] || s.Name != names[i] || !s.Applied || s.AppliedAt.IsZero() {
			t.Errorf("status[%d] = %+v, want %s (version %d) applied", i, s, names[i], versions[i])
		}
	}
}

// Several instances migrating one fresh database at once: every one succeeds, each migration is
// applied once (by whichever took the lock), and the versions are recorded once each.
func TestMigrateConcurrentlyAppliesOnce(t *testing.T) {
	t.Parallel()
	names, versions := migrationFiles(t)
	dsn := testenv.Postgres(t)

	// Before anything ran: all pending, and asking changed nothing.
	fresh := openDB(t, dsn)
	freshDatabaseIsAllPending(t, fresh)

	const n = 6
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	dbs := make([]*store.DB, n)
	for i := range dbs {
		dbs[i] = openDB(t, dsn) // a pool (and sessions) of its own, as a separate instance has
	}
	migrateAtOnce(t, dbs, log)
	if got := strings.Count(logs.String(), "migration applied"); got != len(names) {
		t.Errorf("%d migrations applied in all, want %d (each once):\n%s", got, len(names), logs)
	}
	checkAllApplied(t, fresh, names, versions)

	// Again: nothing left to do.
	before := strings.Count(logs.String(), "migration applied")
	if err := dbs[0].Migrate(context.Background(), log); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(logs.String(), "migration applied"); got != before {
		t.Errorf("a second Migrate applied %d migrations, want none", got-before)
	}
}

// freshDatabaseIsAllPending: a database nothing ran on shows every migration pending, and asking
// creates no table.
func freshDatabaseIsAllPending(t *testing.T, fresh *store.DB) {
	t.Helper()
	states, err := fresh.MigrationStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		if s.Applied {
			t.Errorf("fresh database: %s applied", s.Name)
		}
	}
	var tables int64
	fresh.Gorm().Raw(`SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables)
	if tables != 0 {
		t.Fatalf("MigrationStatus created %d tables, want none", tables)
	}
}

// migrateAtOnce has every one of dbs (an instance each) migrate at the same moment; each must
// succeed.
func migrateAtOnce(t *testing.T, dbs []*store.DB, log *slog.Logger) {
	t.Helper()
	start := make(chan struct{})
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i := range dbs {
		wg.Go(func() {
			<-start
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			errs[i] = dbs[i].Migrate(ctx, log)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: Migrate: %v", i, err)
		}
	}
}

// A database migrated by the hand-written runner (table schema_migrations) is adopted: goose
// records what it had applied, with its times, and runs none of that SQL again; what it had not
// applied goose applies.
func TestMigrateAdoptsTheOldRunnersDatabase(t *testing.T) {
	t.Parallel()
	names, versions := migrationFiles(t)
	for _, upTo := range []int{len(names), 3} {
		t.Run(strconv.Itoa(upTo), func(t *testing.T) {
			t.Parallel()
			adoptsTheOldRunnersDatabase(t, names, versions, upTo)
		})
	}
}

// adoptsTheOldRunnersDatabase is TestMigrateAdoptsTheOldRunnersDatabase on a database the old
// runner migrated up to names[upTo-1].
func adoptsTheOldRunnersDatabase(t *testing.T, names []string, versions []int64, upTo int) {
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	db := openDB(t, dsn)
	g := db.Gorm()
	appliedAt := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	migrateAsTheOldRunner(t, db, names[:upTo], appliedAt)

	// Three instances start at once on it: one adopts, the others find it adopted.
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	dbs := []*store.DB{db, openDB(t, dsn), openDB(t, dsn)}
	errs := make([]error, len(dbs))
	var wg sync.WaitGroup
	for i := range dbs {
		wg.Go(func() { errs[i] = dbs[i].Migrate(ctx, log) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: Migrate on the old runner's database: %v", i, err)
		}
	}
	if got := strings.Count(logs.String(), "adopted the database of the old runner"); got != 1 {
		t.Errorf("adopted %d times, want once:\n%s", got, logs)
	}
	if got, want := strings.Count(logs.String(), "migration applied"), len(names)-upTo; got != want {
		t.Errorf("%d migrations ran, want %d (only those the old runner had not applied):\n%s", got, want, logs)
	}
	checkAllApplied(t, db, names, versions)
	states, err := db.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range states[:upTo] {
		if got := s.AppliedAt.Format(time.DateTime); got != appliedAt.In(time.Local).Format(time.DateTime) && got != appliedAt.Format(time.DateTime) {
			t.Errorf("%s: applied at %s, want the old runner's %s", s.Name, got, appliedAt)
		}
	}
	var users int64
	g.Raw(`SELECT count(*) FROM users WHERE username = 'kept'`).Scan(&users)
	if users != 1 {
		t.Errorf("the row written before the adoption is gone (%d rows)", users)
	}
}

// migrateAsTheOldRunner does what the hand-written runner did: each file's SQL, then a row
// naming the file (at appliedAt); then writes a row the first migration's SQL would refuse to
// create again, and checks that the status reads the old table before any adoption.
func migrateAsTheOldRunner(t *testing.T, db *store.DB, files []string, appliedAt time.Time) {
	t.Helper()
	g := db.Gorm()
	if err := g.Exec(`CREATE TABLE schema_migrations (version TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`).Error; err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		sql, _ := migrations.FS.ReadFile(f)
		if err := g.Exec(string(sql)).Error; err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := g.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, f, appliedAt).Error; err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Exec(`INSERT INTO users (username, password_hash, role) VALUES ('kept', 'x', 'shopper')`).Error; err != nil {
		t.Fatal(err)
	}
	states, err := db.MigrationStatus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range states {
		if want := i < len(files); s.Applied != want || (want && !s.AppliedAt.Equal(appliedAt)) {
			t.Errorf("before adoption: %s applied=%v at %v, want applied=%v at %v", s.Name, s.Applied, s.AppliedAt, want, appliedAt)
		}
	}
}
