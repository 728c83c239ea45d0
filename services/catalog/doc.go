// Package catalog decides what a merchant may do with a sale and what the shoppers are shown of
// it: creating and editing sales (the rules of a started sale, a quantity below what is sold),
// pausing and ending them, the warm-up into Redis, the displayed stock and the listings, the
// merchant's live view, funnel and orders, and the reminders before a start.
package catalog
