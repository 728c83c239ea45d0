package shop_test

import (
	"errors"
	"testing"

	"github.com/flashsale/flashsale/shop"
)

// The order's state machine: what paying and cancelling answer in each status, no engine needed.
func TestOrderStateMachine(t *testing.T) {
	t.Parallel()
	statuses := []string{shop.StatusQueued, shop.StatusPending, shop.StatusPaid, shop.StatusExpired, shop.StatusCancelled, shop.StatusFailed}
	pay := map[string]shop.Code{shop.StatusQueued: shop.CodeNotPayable, shop.StatusPending: shop.CodeNotPayable,
		shop.StatusPaid: "", shop.StatusExpired: shop.CodeExpired, shop.StatusCancelled: shop.CodeNotPayable, shop.StatusFailed: shop.CodeNotPayable}
	cancel := map[string]shop.Code{shop.StatusQueued: shop.CodeNotCancellable, shop.StatusPending: "",
		shop.StatusPaid: shop.CodeNotCancellable, shop.StatusExpired: shop.CodeNotCancellable, shop.StatusCancelled: shop.CodeNotCancellable, shop.StatusFailed: shop.CodeNotCancellable}
	code := func(err error) shop.Code {
		var e *shop.Error
		if errors.As(err, &e) {
			return e.Code
		}
		if err != nil {
			return "not a contract error"
		}
		return ""
	}
	for _, st := range statuses {
		if got := code(shop.PaidAnswer(st)); got != pay[st] {
			t.Errorf("pay, found %s: %q, want %q", st, got, pay[st])
		}
		if got := code(shop.Cancellable(st)); got != cancel[st] {
			t.Errorf("cancel, %s: %q, want %q", st, got, cancel[st])
		}
	}
}
