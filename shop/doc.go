// Package shop is the business vocabulary of a flash sale: sales and their items, orders and their
// statuses, the purchase limit, the currencies and the limits on what a merchant may create, the
// reasons a unit goes back, and the error codes of the public contract. It holds no rule that needs
// an engine: the services decide, the store keeps, and both speak these words.
package shop
