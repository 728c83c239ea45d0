//go:build linux

package chaos

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/faults"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/testenv"
)

// scenarioScarce is seed 003's case: 410 shoppers for 41 units over three instances.
func scenarioScarce(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{})
	s := c.createSale(time.Now().Add(-time.Second), 0, 41)
	l := newLedger()
	c.run(l, s, shoppersFor(s, 1, 410), loadOpts{attempts: 10})
	r.Faults = "none (contention)"
	c.finish(t, r, l, s)
	if r.Accepted != 41 || r.Orders != 41 {
		t.Errorf("41 units, 410 shoppers: %d answered 202, %d orders; want 41 and 41 (answers %v)", r.Accepted, r.Orders, l.status)
	}
	if l.status[410] != 410-41 {
		t.Errorf("want %d sold-out answers, got %v", 410-41, l.status)
	}
}

// scenarioDoubleClicks: each of 30 shoppers clicks buy 12 times at once, across the three
// instances, with one token per instance (each sent four times).
func scenarioDoubleClicks(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{})
	s := c.createSale(time.Now().Add(-time.Second), 0, 100)
	l := newLedger()
	r.Faults = "12 concurrent clicks per shopper, 3 tokens, 3 instances"
	seen := c.clickTwelveTimes(t, l, s)
	for u, ids := range seen {
		if len(ids) != 1 {
			r.Violations++
			t.Errorf("shopper %d: answers named %d different orders, want exactly 1: %v", u, len(ids), ids)
		}
	}
	c.finish(t, r, l, s)
	if r.Orders != 30 {
		t.Errorf("30 shoppers clicking: %d live orders, want 30", r.Orders)
	}
}

// clickTwelveTimes has each of 30 shoppers click buy 12 times at once, on the three instances in
// turn, with one token per instance (each sent four times); it records the answers in the ledger
// and returns, per shopper, the order ids any answer named.
func (c *cluster) clickTwelveTimes(t *testing.T, l *ledger, s sale) map[int64]map[string]bool {
	var wg sync.WaitGroup
	seen := map[int64]map[string]bool{} // shopper → order ids named by any answer
	var mu sync.Mutex
	for u := int64(1); u <= 30; u++ {
		bearer := bearerOf(u)
		seen[u] = map[string]bool{}
		var toks []string
		for i := range 3 {
			tok, err := c.purchaseToken(i, bearer, s.id)
			if err != nil {
				t.Fatal(err)
			}
			toks = append(toks, tok)
		}
		for click := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				i := click % 3
				tok := toks[(click/3)%3]
				ans, err := c.do(i, "POST", fmt.Sprintf("/api/flash-sales/items/%d/purchase", s.items[0]), bearer, nil, "X-Purchase-Token", tok)
				l.mu.Lock()
				defer l.mu.Unlock()
				if err != nil {
					l.noAnswer[u] = true
					return
				}
				l.status[ans.status]++
				mu.Lock()
				defer mu.Unlock()
				switch {
				case ans.status == 202:
					l.acked[ans.str("orderId")] = u
					l.ackedAt[ans.str("orderId")] = time.Now()
					seen[u][ans.str("orderId")] = true
				case ans.status == 409 && ans.str("error") == "ALREADY_PURCHASED":
					l.named[ans.str("orderId")] = true
					seen[u][ans.str("orderId")] = true
				case ans.status == 403 || ans.status == 503:
				default:
					l.odd = append(l.odd, fmt.Sprintf("click: %d %s", ans.status, ans.raw))
				}
			}()
		}
	}
	wg.Wait()
	return seen
}

// racedPayment is one payment of scenarioPayVsExpiry: its order, the answer's status, or why
// it was not sent.
type racedPayment struct {
	id     string
	status int
	err    error
}

// scenarioPayVsExpiry: 1,000 orders with a 2-second payment window; each shopper pays at a
// moment spread over a second around its order's deadline (pay_by), racing the expiry job of
// three instances: exactly one of them wins, and the answer says which.
func scenarioPayVsExpiry(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{})
	s := c.createSale(time.Now().Add(-time.Second), 2*time.Second, 500, 500)
	l := newLedger()
	var mu sync.Mutex
	var pays []*racedPayment
	var wg sync.WaitGroup
	var k atomic.Int64
	pay := func(id string, user int64) {
		defer wg.Done()
		p := &racedPayment{id: id}
		mu.Lock()
		pays = append(pays, p)
		mu.Unlock()
		// the payment window counts from when the order was written: wait for it, read pay_by
		var payBy time.Time
		err := testenv.Poll(15*time.Second, testenv.PollInterval, func() error {
			var rows []time.Time
			if err := c.sql.Raw(`SELECT pay_by FROM orders WHERE id = ?`, id).Scan(&rows).Error; err != nil || len(rows) != 1 {
				return fmt.Errorf("%d rows, %v", len(rows), err)
			}
			payBy = rows[0]
			return nil
		})
		if err != nil {
			p.err = fmt.Errorf("order %s not written: %w", id, err)
			return
		}
		n := k.Add(1)
		time.Sleep(time.Until(payBy.Add(time.Duration(n%1000-500) * time.Millisecond)))
		ans, err := c.do(int(n%3), "POST", "/api/flash-sales/orders/"+id+"/pay", bearerOf(user), nil)
		p.status, p.err = ans.status, err
	}
	c.run(l, s, shoppersFor(s, 1, 1000), loadOpts{attempts: 8, accepted: func(id string, user int64) {
		wg.Add(1)
		pay(id, user)
	}})
	wg.Wait()
	r.Faults = "1,000 payments from 0.5 s before to 0.5 s after pay_by, vs the expiry job"
	c.checkPaymentsAgreeWithPostgres(t, r, s, pays)
	// let the expiry job give the last units back before the final check
	time.Sleep(3 * time.Second)
	c.finish(t, r, l, s)
}

// checkPaymentsAgreeWithPostgres checks that each payment's answer is what Postgres says of its
// order (200 and PAID, or not 200 and not PAID), and that the race happened both ways.
func (c *cluster) checkPaymentsAgreeWithPostgres(t *testing.T, r *result, s sale, pays []*racedPayment) {
	orders, err := c.orders(context.Background(), s.id)
	if err != nil {
		t.Fatal(err)
	}
	st := map[string]string{}
	for _, o := range orders {
		st[o.id] = o.status
	}
	counts := map[string]int{}
	for _, p := range pays {
		if p.err != nil {
			r.Violations++
			t.Errorf("payment: %v", p.err)
			continue
		}
		counts[fmt.Sprintf("%d→%s", p.status, st[p.id])]++
		switch {
		case p.status == 200 && st[p.id] != shop.StatusPaid:
			r.Violations++
			t.Errorf("order %s: payment answered 200, postgres says %s", p.id, st[p.id])
		case p.status != 200 && st[p.id] == shop.StatusPaid:
			r.Violations++
			t.Errorf("order %s: payment answered %d, postgres says PAID", p.id, p.status)
		}
	}
	r.Note = fmt.Sprintf("payment answer → final status: %v", counts)
	if counts["200→PAID"] == 0 || len(pays)-counts["200→PAID"] == 0 {
		t.Errorf("no race happened: %v", counts)
	}
}

// scenarioDuplicates: a 1-second ack wait and instance 0 stopped (SIGSTOP) holding a claimed,
// unwritten batch for 3 s: the batch is redelivered to another writer, then the first one wakes
// and writes it again.
func scenarioDuplicates(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{env: map[string]string{"FLASHSALE_WRITER_ACK_WAIT": "1s"},
		faults: map[int]string{0: faults.WriterBeforeCommit + ":stop@3"}})
	s := c.createSale(time.Now().Add(-time.Second), 0, 800, 800)
	l := newLedger()
	done := c.goRun(l, s, shoppersFor(s, 1, 2000), loadOpts{})
	c.waitStopped(t, 0, 20*time.Millisecond, "instance 0's writer stopped itself")
	time.Sleep(3 * time.Second)
	c.inst[0].proc.signal(syscall.SIGCONT)
	r.Faults = "ack wait 1 s; SIGSTOP instance 0 before its 3rd commit for 3 s, SIGCONT"
	<-done
	c.finish(t, r, l, s)
	if r.redelivered == 0 {
		t.Errorf("no writer found an order already written: the stopped writer's batch was not delivered twice")
	}
}

// botIP is the one address of scenario 14's bot.
const botIP = "203.0.113.9"

// scenarioBot: rate limits on; one shopper from one address sends purchase requests as fast as
// the suite can to all three instances while 200 ordinary shoppers (each its own address) buy.
func scenarioBot(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{env: map[string]string{"FLASHSALE_RATE_LIMITS": "on", "FLASHSALE_TRUSTED_PROXIES": "127.0.0.1"}})
	s := c.createSale(time.Now().Add(-time.Second), 0, 150, 150)
	l := newLedger()
	shoppers := shoppersFor(s, 1, 200)
	for k := range shoppers {
		shoppers[k].ip = fmt.Sprintf("198.51.100.%d", k%250+1)
		if k >= 250 {
			shoppers[k].ip = fmt.Sprintf("198.51.101.%d", k%250+1)
		}
	}
	bot := int64(99999)
	botBearer := bearerOf(bot)
	var botTok []string
	for i := range 3 {
		tok, err := c.purchaseToken(i, botBearer, s.id, "X-Forwarded-For", botIP)
		if err != nil {
			t.Fatal(err)
		}
		botTok = append(botTok, tok)
	}
	done := c.goRun(l, s, shoppers, loadOpts{attempts: 10, retryPause: 300 * time.Millisecond})
	const burst = 6000
	perInst, rate := c.botBurst(l, s, bot, botTok, burst)
	<-done
	r.Faults = fmt.Sprintf("%d bot requests at %.0f/s", burst, rate)
	for i, m := range perInst {
		if m[429] == 0 {
			r.Violations++
			t.Errorf("instance %d never limited the bot: %v", i, m)
		}
		if m[500] > 0 {
			r.Violations++
			t.Errorf("instance %d answered the bot 500: %v", i, m)
		}
	}
	r.Note = fmt.Sprintf("bot answers per instance %v", perInst)
	c.finish(t, r, l, s)
	botOrders := 0
	orders, _ := c.orders(context.Background(), s.id)
	for _, o := range orders {
		if o.user == bot && live(o.status) {
			botOrders++
		}
	}
	if botOrders > 1 {
		t.Errorf("the bot holds %d orders, want at most 1", botOrders)
	}
	if r.Orders < 150 {
		t.Errorf("the ordinary shoppers bought %d units of 300 with 200 shoppers: the bot crowded them out", r.Orders)
	}
}

// botBurst sends the bot's burst requests, 64 at a time, to the three instances in turn, each with
// that instance's token; it records a 202 in the ledger and returns the answers per instance and
// the rate they were sent at.
func (c *cluster) botBurst(l *ledger, s sale, bot int64, botTok []string, burst int) ([3]map[int]int, float64) {
	botBearer := bearerOf(bot)
	var mu sync.Mutex
	perInst := [3]map[int]int{{}, {}, {}}
	var wg sync.WaitGroup
	start := time.Now()
	sem := make(chan struct{}, 64)
	for k := range burst {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			i := k % 3
			ans, err := c.do(i, "POST", fmt.Sprintf("/api/flash-sales/items/%d/purchase", s.items[0]), botBearer, nil,
				"X-Purchase-Token", botTok[i], "X-Forwarded-For", botIP)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				perInst[i][0]++
				return
			}
			perInst[i][ans.status]++
			if ans.status == 202 {
				l.mu.Lock()
				l.acked[ans.str("orderId")] = bot
				l.ackedAt[ans.str("orderId")] = time.Now()
				l.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rate := float64(burst) / time.Since(start).Seconds()
	return perInst, rate
}

// scenarioSkew: instance 2's clock runs 2 s ahead; shoppers hammer all three from 3 s before
// the start. Nobody may buy before the start on any instance.
func scenarioSkew(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{instEnv: []map[string]string{nil, nil, {"FLASHSALE_CLOCK_SKEW": "2s"}}})
	startsAt := time.Now().Add(4 * time.Second).Truncate(time.Millisecond)
	s := c.createSale(startsAt, 0, 100, 100)
	for time.Until(startsAt) > 3*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	l := newLedger()
	c.run(l, s, shoppersFor(s, 1, 300), loadOpts{attempts: 40, retryPause: 100 * time.Millisecond})
	r.Faults = "instance 2's clock +2 s; shoppers from 3 s before the start"
	l.mu.Lock()
	early := 0
	for _, at := range l.ackedAt {
		if at.Before(startsAt) {
			early++
		}
	}
	l.mu.Unlock()
	if early > 0 {
		r.Violations++
		t.Errorf("%d purchases answered 202 before the sale started", early)
	}
	var n int64
	if err := c.sql.Raw(`SELECT count(*) FROM orders o JOIN items i ON i.id = o.item_id JOIN sales s ON s.id = i.sale_id
		WHERE s.id = ? AND o.reserved_at < s.starts_at`, s.id).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		r.Violations++
		t.Errorf("%d orders reserved before the start", n)
	}
	r.Note = fmt.Sprintf("answers %v", l.status)
	c.finish(t, r, l, s)
}
