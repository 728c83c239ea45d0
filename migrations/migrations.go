// Package migrations holds the SQL schema migrations, applied in file-name order by the binary.
package migrations

import "embed"

// FS holds every *.sql migration; names sort in the order they apply.
//
//go:embed *.sql
var FS embed.FS
