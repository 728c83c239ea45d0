// Package store keeps flashsale's state in its three engines, behind the rules that decide on
// it: Postgres through GORM (DB: sales, items, orders, payments, the source of truth, with the
// SQL migrations applied by the binary), Redis with its Lua scripts (Stock: the hot state of
// every sale, one hash tag per sale or stock shard, and the token budget, the leases and the
// rate-limit buckets) and NATS JetStream (Queue: the order stream the writer drains, the
// dead letters and the notices between instances). It decides nothing a rule package decides;
// the rules it runs where they are decided (a Lua script, a SQL statement) say so where they are.
package store
