package auth

import (
	"context"

	"github.com/flashsale/flashsale/shop"
)

// DB is what this package reads and writes in Postgres (store.DB).
type DB interface {
	CreateUser(ctx context.Context, u *shop.User) error
	UserByName(ctx context.Context, name string) (shop.User, error)
	UsernameByID(ctx context.Context, id int64) (string, error)
}
