// Package lua holds the Redis scripts of the purchase path, embedded so the binary carries them.
package lua

import _ "embed"

// Reserve is the atomic check-and-reserve of one purchase.
//
//go:embed reserve.lua
var Reserve string

// Release gives back a reservation that will never become an order, once.
//
//go:embed release.lua
var Release string

// Load warms an item's keys from Postgres when they are missing.
//
//go:embed load.lua
var Load string

// Claim marks a batch's reservations as being written, so they can no longer be released.
//
//go:embed claim.lua
var Claim string
