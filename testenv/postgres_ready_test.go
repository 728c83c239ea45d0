package testenv

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A postmaster is ready only when the server answering on its port runs on its data directory:
// another process's Postgres on the same port (a port chosen in another test process) is taken
// for what it is, not for the new server, and a start on a port already answering is refused.
func TestPostgresReadyIsTheServerStarted(t *testing.T) {
	admin, err := adminDSN()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	var dataDir string
	err = conn.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dataDir)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// a process that runs but is no postmaster: the wait must not end on another server's answer
	proc, err := spawnProc(t.TempDir()+"/sleep.log", t.TempDir(), nil, false, "sleep", "30")
	if err != nil {
		t.Fatal(err)
	}
	defer proc.kill()
	if err := waitReadyFor(proc, admin, t.TempDir(), time.Second); !errors.Is(err, errPortTaken) {
		t.Errorf("ready on another server's answer: %v", err)
	}
	if err := waitReadyFor(proc, admin, dataDir, 5*time.Second); err != nil {
		t.Errorf("not ready on its own data directory %s: %v", dataDir, err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	srv := &PGServer{Bin: "/nonexistent", Data: t.TempDir(), Port: port, Log: t.TempDir() + "/pg.log"}
	if err := srv.Start(); !errors.Is(err, errPortTaken) {
		t.Errorf("a start on a port already answering: %v, want refused", err)
	}
}
