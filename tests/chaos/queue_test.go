//go:build linux

package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/testenv"
)

// Scenario 20a: Redis goes back a second while one instance is a fresh process that has taken no
// purchase of the sale (issue 18.3): its floors must come from Postgres, so that its first
// purchase finds Redis's counter behind instead of reissuing the lost seqs.

// pickOnly makes the shoppers buy on the given instances only (their retries too).
func pickOnly(shoppers []shopper, idx ...int) []shopper {
	for k := range shoppers {
		u := int(shoppers[k].user)
		shoppers[k].pick = func(a int) int { return idx[(u+a)%len(idx)] }
	}
	return shoppers
}

// metricOf reads one sample of instance i's /metrics (the exact series, labels included), 0 if
// absent. Only the instance asked is reached (a stopped one would not answer).
func (c *cluster) metricOf(i int, series string) float64 {
	resp, err := c.client.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", c.inst[i].metricsPort))
	if err != nil {
		return 0
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// loseWritesAround makes Redis lose every write of the sale made while during runs: on one
// server a copy of its append-only file is taken before, and Redis is killed and started from
// that copy after; on the cluster (as scenario 06 does) the sale's replica is paused behind a
// 24 MB filler before, and after, the master is killed and the replica promoted without those
// writes, the old master restarted as its replica. during runs with Redis healthy.
func (c *cluster) loseWritesAround(t *testing.T, saleID int64, during func()) string {
	t.Helper()
	ctx := context.Background()
	switch rb := c.redis.(type) {
	case *redisSingle:
		snapshot := rb.srv.CopyData(t)
		began := time.Now()
		during()
		took := time.Since(began)
		rb.srv.Restore(t, snapshot)
		return fmt.Sprintf("Redis SIGKILL, restarted from a copy of its AOF taken %.1f s earlier", took.Seconds())
	case *redisCluster:
		m, replica := rb.masterOf(t, saleID)
		filler := ""
		for i := 0; filler == ""; i++ {
			if k := fmt.Sprintf("chaos-filler:%d", i); rb.cl.MustMasterOf(t, k) == m {
				filler = k
			}
		}
		if err := rb.cl.Pause(replica); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Do(ctx, "set", filler, strings.Repeat("x", 24<<20)); err != nil {
			_ = rb.cl.Resume(replica)
			t.Fatalf("filler on %s: %v", m.Addr, err)
		}
		began := time.Now()
		during()
		took := time.Since(began)
		rb.cl.MustKill(t, m)
		if err := rb.cl.Resume(replica); err != nil {
			t.Fatal(err)
		}
		heir := rb.cl.MustWaitFailover(t, m)
		if heir != replica {
			t.Fatalf("%s took over the sale's slot, want its replica %s", heir.Addr, replica.Addr)
		}
		if n, err := heir.Do(ctx, "strlen", filler); err != nil || n != int64(0) {
			t.Errorf("the promoted replica has the filler (%v bytes, %v): no write was lost", n, err)
		}
		rb.cl.MustRestart(t, m)
		return fmt.Sprintf("the sale's replica SIGSTOPped behind a 24 MB filler for %.1f s of writes, the master SIGKILLed, the replica promoted without them", took.Seconds())
	}
	t.Fatalf("unknown redis backend %T", c.redis)
	return ""
}

// scenarioRewindRestart (20a). A rush of 600 shoppers over the three instances; instance 0 is
// killed and started again, its keeper slowed to one pass an hour (the pass at its start comes
// before the loss: a keeper compares the same Postgres seqs at its own pace, and this scenario is
// about the purchase path of a fresh process). Then Redis loses a second of writes: a wave of 400
// shoppers on instances 1 and 2, all written to Postgres (the queue drained, so the writers'
// claim cannot be the detector), then Redis restored to before it; instances 1 and 2 (their
// floors in memory, their keepers every 250 ms) are stopped (SIGSTOP) just before the restore,
// so the restarted instance is the only one that can see the loss. The next 40 shoppers buy on
// the restarted instance: none may be answered 202 (with floors starting at 0 it reissued the
// lost seqs and sold), the sale must be marked lost by the reserve script
// (flashsale_redis_data_loss_total{detected_by="reserve"} on instance 0). Instances 1 and 2 are
// continued; the keeper must rebuild the sale (a new load epoch) and a last wave buys; no two
// orders share a seq, and the end of every scenario holds.
func scenarioRewindRestart(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{})
	s := c.createSale(time.Now().Add(-time.Second), 0, 800, 800)
	l := newLedger()
	c.run(l, s, shoppersFor(s, 1, 600), loadOpts{attempts: 10, retryPause: 300 * time.Millisecond})
	if _, err := c.waitDurable(l.ackedIDs(), 30*time.Second); err != nil {
		t.Fatalf("first wave: %v", err)
	}

	// instance 0 restarted: a fresh process, no seq of the sale in its memory
	c.inst[0].proc.kill()
	c.start(0, map[string]string{"FLASHSALE_KEEPER_INTERVAL": "1h"})
	c.waitReady(0)
	epochBefore := c.saleField(s.id, "epoch")
	seqBefore := c.saleField(s.id, "seq")

	// Redis loses a second of writes, every one of them written to Postgres
	var lostWave []string
	var pgMaxAtLoss int64
	var stoppedAt time.Time
	what := c.loseWritesAround(t, s.id, func() {
		lostWave, pgMaxAtLoss, stoppedAt = c.sellAWaveToLose(t, l, s)
	})
	defer func() { // whatever happens below, the end of the scenario finds them running
		c.inst[1].proc.signal(syscall.SIGCONT)
		c.inst[2].proc.signal(syscall.SIGCONT)
	}()
	r.Faults = fmt.Sprintf("instance 0 SIGKILLed and restarted (keeper 1 pass/h); %s (%d acknowledged orders, all in Postgres, seqs up to %d); instances 1 and 2 SIGSTOPped across the loss",
		what, len(lostWave), pgMaxAtLoss)
	seqAfterLoss := c.saleField(s.id, "seq")
	if n, _ := strconv.ParseInt(seqAfterLoss, 10, 64); seqAfterLoss == "" || n >= pgMaxAtLoss {
		t.Fatalf("Redis's counter after the loss is %q, Postgres holds seqs up to %d: nothing was lost", seqAfterLoss, pgMaxAtLoss)
	}

	// the restarted instance takes the next purchases
	third := c.buyOnTheRestarted(t, r, l, s)
	byReserve := c.checkLossDetectedByReserve(t, r, s, pgMaxAtLoss)

	// the others continue; the keeper rebuilds once the queue has drained
	c.inst[1].proc.signal(syscall.SIGCONT)
	c.inst[2].proc.signal(syscall.SIGCONT)
	stoppedFor := time.Since(stoppedAt)
	continuedAt := time.Now()
	c.waitRebuilt(t, s.id, epochBefore, 90*time.Second, "the sale rebuilt")
	r.Durable = fmt.Sprintf("rebuilt %.1fs after instances 1 and 2 were continued", time.Since(continuedAt).Seconds())
	for i := 1; i <= 2; i++ {
		c.waitReady(i)
	}

	// a last wave buys from the rebuilt sale, the restarted instance first
	last := c.waveBuys(t, r, l, s, shoppersFor(s, 30001, 300), "the last wave, from the rebuilt sale")
	c.instancesAlive(t, r, "during the scenario")
	c.finish(t, r, l, s)

	c.checkNoSeqTwice(t, r, s)
	r.Note = fmt.Sprintf("counter %s before the loss wave, %s after the restore, Postgres up to %d; restarted instance's 40 purchases %v; detected_by=reserve %.0f on it; instances 1 and 2 stopped %.1f s; epoch %s → %s; last wave %d answered 202; ",
		seqBefore, seqAfterLoss, pgMaxAtLoss, third, byReserve, stoppedFor.Seconds(), epochBefore, c.saleField(s.id, "epoch"), last) + r.Note
}

// sellAWaveToLose is the wave Redis will lose: 400 shoppers buy on instances 1 and 2, every order
// written and the queue drained; then instances 1 and 2 (their floors in memory) stop, just before
// the loss. It returns the wave's orders, Postgres's highest seq and when they stopped.
func (c *cluster) sellAWaveToLose(t *testing.T, l *ledger, s sale) (lostWave []string, pgMaxAtLoss int64, stoppedAt time.Time) {
	before := len(l.ackedIDs())
	c.run(l, s, pickOnly(shoppersFor(s, 10001, 400), 1, 2), loadOpts{attempts: 10, retryPause: 300 * time.Millisecond})
	all := l.ackedIDs()
	if len(all)-before < 100 {
		t.Fatalf("the wave Redis will lose sold %d units, want at least 100 (answers %v)", len(all)-before, l.status)
	}
	if _, err := c.waitDurable(all, 30*time.Second); err != nil {
		t.Fatalf("the wave Redis will lose: %v", err)
	}
	testenv.Eventually(t, 20*time.Second, "the queue drained", func() error {
		if n, err := c.undelivered(); err != nil || n > 0 {
			return fmt.Errorf("%d undelivered (%v)", n, err)
		}
		return nil
	})
	lostWave = all[before:]
	if err := c.sql.Raw(`SELECT COALESCE(max(max_seq), 0) FROM items WHERE sale_id = ?`, s.id).Scan(&pgMaxAtLoss).Error; err != nil {
		t.Fatal(err)
	}
	// the instances that remember seqs stop, just before the loss
	c.inst[1].proc.signal(syscall.SIGSTOP)
	c.inst[2].proc.signal(syscall.SIGSTOP)
	stoppedAt = time.Now()
	return lostWave, pgMaxAtLoss, stoppedAt
}

// buyOnTheRestarted has 40 shoppers, 10 at a time, buy on the restarted instance: none may be
// answered 202. It returns the answers by status.
func (c *cluster) buyOnTheRestarted(t *testing.T, r *result, l *ledger, s sale) map[int]int {
	third := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 10)
	for k := range 40 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			u := int64(20001 + k)
			item := s.items[k%2]
			st, ans := c.probeBuy(0, u, item, s.id)
			mu.Lock()
			third[st]++
			mu.Unlock()
			switch st {
			case http.StatusAccepted:
				l.mu.Lock()
				l.acked[ans.str("orderId")] = u
				l.ackedAt[ans.str("orderId")] = time.Now()
				l.mu.Unlock()
				r.Violations++
				t.Errorf("shopper %d bought on the restarted instance from a Redis that lost writes: %s", u, ans.raw)
			case http.StatusServiceUnavailable:
			case 0:
				l.mu.Lock()
				l.noAnswer[u] = true
				l.mu.Unlock()
			default:
				r.Violations++
				t.Errorf("shopper %d on the restarted instance: %d %s, want 503", u, st, ans.raw)
			}
		}()
	}
	wg.Wait()
	return third
}

// checkLossDetectedByReserve checks that the sale is marked lost and that the restarted
// instance's reserve script detected it; it returns that instance's detected_by="reserve" count.
func (c *cluster) checkLossDetectedByReserve(t *testing.T, r *result, s sale, pgMaxAtLoss int64) float64 {
	lost := c.saleField(s.id, "lost")
	byReserve := c.metricOf(0, `flashsale_redis_data_loss_total{detected_by="reserve"}`)
	if lost != "1" {
		r.Violations++
		t.Errorf("after 40 purchases on the restarted instance the sale is not marked lost (lost=%q, counter %s, postgres %d)", lost, c.saleField(s.id, "seq"), pgMaxAtLoss)
	}
	if byReserve == 0 {
		r.Violations++
		t.Errorf("the restarted instance's reserve did not detect the loss (flashsale_redis_data_loss_total{detected_by=\"reserve\"} 0)")
	}
	return byReserve
}

// checkNoSeqTwice checks that no seq was issued twice: a reissued seq is a unit sold from a Redis
// that forgot it.
func (c *cluster) checkNoSeqTwice(t *testing.T, r *result, s sale) {
	ctx := context.Background()
	// no seq issued twice: a reissued seq is a unit sold from a Redis that forgot it
	var dups []struct {
		Seq int64
		N   int64
	}
	if err := c.sql.WithContext(ctx).Raw(`SELECT o.seq AS seq, count(*) AS n FROM orders o JOIN items i ON i.id = o.item_id
		WHERE i.sale_id = ? AND o.seq > 0 GROUP BY o.seq HAVING count(*) > 1`, s.id).Scan(&dups).Error; err != nil {
		t.Fatal(err)
	}
	if len(dups) > 0 {
		r.Violations++
		t.Errorf("%d seqs held by more than one order (reissued after the loss): %v", len(dups), dups[:min(5, len(dups))])
	}
}
