package shop

import "time"

// SaleCursor is a position in a list of sales by time (start or end) and id.
type SaleCursor struct {
	StartsAt time.Time
	ID       int64
}

// OrderCursor is a position in a newest-first list of orders.
type OrderCursor struct {
	ReservedAt time.Time
	ID         string
}
