// Package lua holds the Redis scripts, embedded so the binary carries them. Every script of the
// purchase path touches the keys of one sale only (hash tag {sale:S}); the registration and
// lease scripts touch global keys of their own.
package lua

import _ "embed"

// Reserve is the atomic check-and-reserve of one purchase attempt.
//
//go:embed reserve.lua
var Reserve string

// Tokens grants a block of purchase tokens from a sale's token budget.
//
//go:embed tokens.lua
var Tokens string

// Release gives a unit back once per order, by a named operation.
//
//go:embed release.lua
var Release string

// Load (re)builds a sale's keys from a Postgres snapshot.
//
//go:embed load.lua
var Load string

// Claim marks a batch's reservations as being written, so they can no longer be released.
//
//go:embed claim.lua
var Claim string

// MarkLost fails a sale closed until it is rebuilt from Postgres.
//
//go:embed marklost.lua
var MarkLost string

// Adjust applies a merchant's edit (stock deltas, added items, times, limit, pause) to a loaded sale.
//
//go:embed adjust.lua
var Adjust string

// Funnel adds an instance's purchase funnel counts of one second to a sale's totals and series.
//
//go:embed funnel.lua
var Funnel string

// Transfer moves units of an item between two shards of a sharded sale (out, in, done).
//
//go:embed transfer.lua
var Transfer string

// Held lists a shopper's reservations of a sale still in flight (my orders' QUEUED entries).
//
//go:embed held.lua
var Held string

// RegClaim is the first claim of the embedded NATS registration (taking over this instance's
// previous run's).
//
//go:embed regclaim.lua
var RegClaim string

// RegRenew renews the embedded NATS registration, or takes it if free.
//
//go:embed regrenew.lua
var RegRenew string

// RegDrop gives the embedded NATS registration up, if still held.
//
//go:embed regdrop.lua
var RegDrop string

// Lease takes or renews the reconciliation lease, with its fencing token.
//
//go:embed lease.lua
var Lease string

// DrawState tells what one shard holds of a fair start's draw, for whoever closes it.
//
//go:embed drawstate.lua
var DrawState string

// DrawApply applies a decided draw to one shard, once.
//
//go:embed drawapply.lua
var DrawApply string

// DrawRelease takes back a draw entry whose publish failed.
//
//go:embed drawrelease.lua
var DrawRelease string
