// Package migrations holds the SQL schema migrations: pressly/goose SQL files (each starts with
// "-- +goose Up"; a statement holding semicolons, such as a DO block, sits between
// "-- +goose StatementBegin" and "-- +goose StatementEnd"), applied in version order by the binary.
package migrations

import "embed"

// FS holds every *.sql migration; names sort in the order they apply.
//
//go:embed *.sql
var FS embed.FS
