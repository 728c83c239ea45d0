package testenv

import (
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// SQL opens a connection of the test's own to the database at dsn, closed when the test ends:
// tests read and change the source of truth directly through it, never through the program's
// own connection (the store hands that to no one).
func SQL(t testing.TB, dsn string) *gorm.DB {
	t.Helper()
	g, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true})
	if err != nil {
		t.Fatalf("testenv: sql: %v", err)
	}
	sqlDB, err := g.DB()
	if err != nil {
		t.Fatalf("testenv: sql: %v", err)
	}
	sqlDB.SetMaxOpenConns(4)
	t.Cleanup(func() { sqlDB.Close() })
	return g
}
