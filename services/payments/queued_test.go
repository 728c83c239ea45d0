package payments

import (
	"context"
	"errors"
	"testing"

	"github.com/flashsale/flashsale/shop"
)

type queuedStub struct {
	v   shop.OrderView
	err error
}

func (q queuedStub) Order(context.Context, int64, string) (shop.OrderView, error) { return q.v, q.err }

// A checkout of an order Postgres does not hold: the shopper's QUEUED order is not payable yet,
// anything else is not found, and a Redis that cannot say makes the shop unavailable, not the
// order unknown.
func TestCheckoutOfAnOrderNotWrittenYet(t *testing.T) {
	notFound := shop.Errorf(shop.CodeNotFound, "no order")
	for _, c := range []struct {
		name   string
		queued QueuedOrders
		want   shop.Code
	}{
		{"queued", queuedStub{v: shop.OrderView{Status: shop.StatusQueued}}, shop.CodeNotPayable},
		{"another's or made up", queuedStub{err: shop.Errorf(shop.CodeNotFound, "no order")}, shop.CodeNotFound},
		{"no queue known", noQueued{}, shop.CodeNotFound},
		{"redis down", queuedStub{err: shop.Unavailable(errors.New("redis: connection refused"))}, shop.CodeUnavailable},
	} {
		p := New(Config{}, Deps{Queued: c.queued})
		if got := shop.ErrorCode(p.notWrittenYet(context.Background(), 1, "o", notFound)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
