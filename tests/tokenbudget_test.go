package tests

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/purchase"
	"github.com/flashsale/flashsale/testenv"
)

// The token budget (services/purchase/budget.go): two instances hand out purchase tokens from
// one count in Redis, so the tokens out, not used, stay within the units left plus 10% (20
// units: at most 22), however the shoppers are spread over the instances. The crowd past it is
// answered SOLD_OUT at the token step, in words that say units may come back; a used token frees
// its place only as far as the units left allow; an expired one frees it; the units left after
// the tokens expired are handed out again, and sold. Every invariant holds.
func TestTokenBudgetAcrossInstances(t *testing.T) {
	t.Parallel()
	env := map[string]string{"FLASHSALE_PURCHASE_TOKEN_TTL": "3s"}
	a := newHarness(t, harnessOpts{env: env})
	b := newHarness(t, harnessOpts{shared: a, env: env})
	s := a.liveSale(20)
	item := s.items[0]
	insts := []*harness{a, b}

	// 60 shoppers at once, alternately on a and b.
	type got struct {
		user  int64
		token string
	}
	var mu sync.Mutex
	var tokens []got
	refusals := map[string]int{}
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, user := insts[i%2], int64(1000+i)
			r := h.tokenAttempt(h.token(user, auth.RoleShopper), s.sale)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.Status == http.StatusOK:
				tokens = append(tokens, got{user, r.str("purchaseToken")})
			case r.Status == http.StatusGone && r.str("error") == "SOLD_OUT":
				refusals[r.str("message")]++
			default:
				t.Errorf("a purchase token: %d %s, want 200 or 410 SOLD_OUT", r.Status, r.Raw)
			}
		}()
	}
	wg.Wait()
	// A block an instance took and did not hand out all of is counted until it goes back: a
	// few fewer than 22 may go out.
	if n := len(tokens); n < 18 || n > 22 {
		t.Fatalf("tokens handed out for 20 units: %d, want at most 22 (the units and 10%%), and most of them", n)
	}
	if refusals[purchase.ErrSpokenFor.Message] != 60-len(tokens) {
		t.Fatalf("refusals %v, want %d saying the units are spoken for", refusals, 60-len(tokens))
	}

	// Half the holders buy: 10 units left, and their places freed only as far as what is left
	// allows: the holders still out and the tokens handed out now stay within 11.
	for _, g := range tokens[:10] {
		if r := a.buy(a.token(g.user, auth.RoleShopper), item, g.token); r.Status != http.StatusAccepted {
			t.Fatalf("a holder buys: %d %s", r.Status, r.Raw)
		}
	}
	time.Sleep(250 * time.Millisecond) // past the instances' memory of the spent budget
	// Redis granted 22 and 10 were used: 12 out (those of a block not handed out included),
	// over the 11 allowed, so none is handed out now but what an instance gives back.
	var again int
	for i := range 10 {
		h := insts[i%2]
		r := h.tokenAttempt(h.token(int64(2000+i), auth.RoleShopper), s.sale)
		if r.Status == http.StatusOK {
			again++
		} else if r.Status != http.StatusGone || r.str("message") != purchase.ErrSpokenFor.Message {
			t.Errorf("a token with 10 units left: %d %s, want 200 or 410 SOLD_OUT (spoken for)", r.Status, r.Raw)
		}
	}
	if again > 22-len(tokens) {
		t.Errorf("tokens handed out with 10 units left and %d holders out: %d, want at most %d", len(tokens)-10, again, 22-len(tokens))
	}

	// The other holders walk away: once their tokens expired (3 s), the 10 units left are handed
	// out again, and bought; then the sale is sold out, and says so at the token step.
	var second []got
	testenv.Eventually(t, 10*time.Second, "tokens handed out again once the unused ones expired", func() error {
		for len(second) < 10 {
			user := int64(3000 + len(second))
			h := insts[len(second)%2]
			r := h.tokenAttempt(h.token(user, auth.RoleShopper), s.sale)
			if r.Status != http.StatusOK {
				return fmt.Errorf("%d of 10 handed out again; then %d %s", len(second), r.Status, r.Raw)
			}
			second = append(second, got{user, r.str("purchaseToken")})
		}
		return nil
	})
	for i, g := range second {
		h := insts[i%2]
		if r := h.buy(h.token(g.user, auth.RoleShopper), item, g.token); r.Status != http.StatusAccepted {
			t.Fatalf("a unit left, bought with a token handed out again: %d %s", r.Status, r.Raw)
		}
	}
	for i, h := range insts {
		testenv.Eventually(t, 3*time.Second, "sold out at the token step", func() error {
			if r := h.tokenAttempt(h.token(int64(4000+i), auth.RoleShopper), s.sale); r.Status != http.StatusGone || r.str("message") == purchase.ErrSpokenFor.Message {
				return fmt.Errorf("a token after the last unit: %d %s, want 410 SOLD_OUT (sold out)", r.Status, r.Raw)
			}
			return nil
		})
	}
	a.mu.Lock()
	a.acked = append(a.acked, b.acked...)
	a.mu.Unlock()
	a.checkInvariants(s)
}

// A token a sold-out flag refused before the reserve script could use it goes back to the
// budget: in a sale of two items, the shoppers holding tokens who try the item that sold out
// do not keep the other item's units spoken for until their tokens expire.
func TestTokenBudgetTakesBackTokensRefusedByAFlag(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(1, 9) // 10 units: 11 tokens
	a, b := s.items[0], s.items[1]
	bearers, toks := make([]string, 11), make([]string, 11)
	for i := range toks {
		bearers[i] = h.token(int64(100+i), auth.RoleShopper)
		toks[i] = h.purchaseToken(bearers[i], s.sale)
	}
	if r := h.tokenAttempt(h.token(200, auth.RoleShopper), s.sale); r.Status != http.StatusGone || r.str("message") != purchase.ErrSpokenFor.Message {
		t.Fatalf("a twelfth token: %d %s, want 410 SOLD_OUT (spoken for)", r.Status, r.Raw)
	}
	if r := h.buy(bearers[0], a, toks[0]); r.Status != http.StatusAccepted {
		t.Fatalf("buy the only unit of the first item: %d %s", r.Status, r.Raw)
	}
	if r := h.buy(bearers[1], a, toks[1]); r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
		t.Fatalf("the first item again (Redis refuses, the token used): %d %s, want 410 SOLD_OUT", r.Status, r.Raw)
	}
	// Redis refused: the item's flag refuses the next two before Redis (their tokens unused);
	// one of them sends it twice (given back once)
	for _, i := range []int{2, 3, 3} {
		if r := h.buy(bearers[i], a, toks[i]); r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
			t.Fatalf("the first item, sold out: %d %s, want 410 SOLD_OUT", r.Status, r.Raw)
		}
	}
	if !h.app.SoldOut.Is(a) {
		t.Fatalf("the first item is not flagged sold out: the refusals above reached Redis")
	}
	// 9 units left (10 allowed out); out: 11 - 2 used - 2 given back = 7: three more tokens
	time.Sleep(250 * time.Millisecond)
	more := 0
	for i := range 6 {
		r := h.tokenAttempt(h.token(int64(300+i), auth.RoleShopper), s.sale)
		if r.Status == http.StatusOK {
			more++
			continue
		}
		if r.Status != http.StatusGone || r.str("message") != purchase.ErrSpokenFor.Message {
			t.Fatalf("a token: %d %s, want 200 or 410 SOLD_OUT (spoken for)", r.Status, r.Raw)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if more != 3 {
		t.Errorf("tokens handed out with 9 units left and 7 out: %d, want 3 (the two refused by the flag given back)", more)
	}
	for _, i := range []int{2, 3} { // they still buy the other item with the same tokens
		if r := h.buy(bearers[i], b, toks[i]); r.Status != http.StatusAccepted {
			t.Errorf("the other item with a token the flag refused: %d %s, want 202", r.Status, r.Raw)
		}
	}
	h.checkInvariants(s)
}
