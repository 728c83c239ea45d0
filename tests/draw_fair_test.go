package tests

import (
	"math"
	"net/http"
	"sort"
	"testing"
	"time"
)

// TestDrawIsFair is the proof that a fair start does not favour the fast: 10 shoppers whose
// purchases arrive 50 ms before those of 1,000 others, for 100 units, in two sales that differ only
// in the option.
//
// The statistic: X, how many of the 10 fast shoppers win. If arrival does not matter, X follows the
// hypergeometric distribution of 10 draws from 1,010 entrants of whom 100 win (mean 0.99), and the
// one-sided p-value P(X >= x) says how surprising the fast shoppers' luck is. Without the option
// the fast arrive first and take units first: X = 10, p ≈ 1e-10; the test asserts p < 1e-6 (clearly
// higher). With the option the test asserts p >= 0.001: a fair draw fails it once in a thousand
// runs at most (the fast would have to win 6 or more of 10). A second, stronger check of the
// same property uses every entrant: the rank a shopper gets must not depend on when they arrived,
// so the Spearman correlation between arrival time and rank over the 1,010 entries must be
// indistinguishable from 0 (|z| < 4.5, z = rho * sqrt(n-1): a false alarm about once in 150,000
// runs).
func TestDrawIsFair(t *testing.T) {
	const fast, slow, units = 10, 1000, 100
	h := newHarness(t, harnessOpts{})
	starts := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	fair := h.createSaleWith(map[string]any{"fairStartMillis": 10000}, starts, units)
	plain := h.createSale(starts, units)
	time.Sleep(time.Until(starts))
	fairShoppers := drawShoppers(h, fair.sale, 20_000, fast+slow)
	// the plain sale hands out tokens within its units and 10%: the first 110 asked (the fast
	// ten among them), the others refused at the token step, as they would be refused a unit
	plainShoppers := drawShoppersAsFound(h, plain.sale, 20_000, fast+slow)
	rush := func(s saleIDs, shoppers []*drawShopper) {
		buy := func(i int) {
			sh := shoppers[i]
			if sh.ptoken == "" {
				return // refused a token: nothing to buy with
			}
			sh.answer = h.buy(sh.bearer, s.items[0], sh.ptoken)
			sh.orderID = sh.answer.str("orderId")
		}
		parallel(fast, fast, buy) // the fast ten, all at once
		time.Sleep(50 * time.Millisecond)
		parallel(64, slow, func(i int) { buy(fast + i) })
	}
	rush(fair, fairShoppers)
	if time.Since(starts) >= 10*time.Second {
		t.Fatalf("the entries took %v: not all inside the 10 s window; the machine is too slow for this test", time.Since(starts))
	}
	for _, sh := range fairShoppers {
		if sh.answer.Status != http.StatusAccepted || sh.answer.Body["draw"] != true {
			t.Fatalf("purchase in the fair window: %d %s, want 202 draw: true", sh.answer.Status, sh.answer.Raw)
		}
	}
	rush(plain, plainShoppers)

	wins := func(shoppers []*drawShopper) (fastWins, total int) {
		for i, sh := range shoppers {
			if sh.orderID == "" {
				continue
			}
			if st := finalStatus(h, sh)["status"]; st == "PENDING" {
				total++
				if i < fast {
					fastWins++
				}
			}
		}
		return fastWins, total
	}
	xPlain, nPlain := wins(plainShoppers)
	xFair, nFair := wins(fairShoppers)
	if nPlain != units || nFair != units {
		t.Fatalf("units sold: %d without the option, %d with it; want %d each", nPlain, nFair, units)
	}
	pPlain := hypergeomTail(fast+slow, units, fast, xPlain)
	pFair := hypergeomTail(fast+slow, units, fast, xFair)
	t.Logf("without a fair start: the 10 fast shoppers won %d (p = %.3g); with it: %d (p = %.3g); the others won %.1f%% and %.1f%%",
		xPlain, pPlain, xFair, pFair, 100*float64(units-xPlain)/slow, 100*float64(units-xFair)/slow)
	if pPlain >= 1e-6 {
		t.Errorf("without the option the fast shoppers won %d of 10 (p = %.3g): arrival order should favour them clearly", xPlain, pPlain)
	}
	if pFair < 0.001 {
		t.Errorf("with a fair start the fast shoppers won %d of 10 (p = %.3g < 0.001): the draw favours the fast", xFair, pFair)
	}

	var entries []struct {
		At   time.Time
		Rank int64
	}
	if err := h.sql().Raw(`SELECT reserved_at AS at, draw_rank AS rank FROM orders WHERE sale_id = ? AND draw_rank IS NOT NULL`, fair.sale).
		Scan(&entries).Error; err != nil {
		t.Fatal(err)
	}
	if len(entries) != fast+slow {
		t.Fatalf("the draw's record holds %d entries, want %d", len(entries), fast+slow)
	}
	at, rank := make([]float64, len(entries)), make([]float64, len(entries))
	for i, e := range entries {
		at[i], rank[i] = float64(e.At.UnixMicro()), float64(e.Rank)
	}
	rho := spearman(at, rank)
	z := rho * math.Sqrt(float64(len(entries)-1))
	t.Logf("arrival time against rank over %d entries: Spearman rho = %.4f, z = %.2f", len(entries), rho, z)
	if math.Abs(z) >= 4.5 {
		t.Errorf("the rank depends on arrival: Spearman rho %.4f, z %.2f", rho, z)
	}
	h.checkInvariants(fair)
	h.checkInvariants(plain)
}

// hypergeomTail is P(X >= x) for X the number of marked items among n drawn without replacement
// from N items of which K are marked.
func hypergeomTail(N, K, n, x int) float64 {
	lchoose := func(a, b int) float64 {
		la, _ := math.Lgamma(float64(a + 1))
		lb, _ := math.Lgamma(float64(b + 1))
		lab, _ := math.Lgamma(float64(a - b + 1))
		return la - lb - lab
	}
	p := 0.0
	for k := x; k <= min(n, K); k++ {
		p += math.Exp(lchoose(K, k) + lchoose(N-K, n-k) - lchoose(N, n))
	}
	return min(p, 1)
}

// spearman is the rank correlation of a and b (ties take their average rank).
func spearman(a, b []float64) float64 {
	ra, rb := ranks(a), ranks(b)
	var ma, mb float64
	for i := range ra {
		ma += ra[i]
		mb += rb[i]
	}
	ma /= float64(len(ra))
	mb /= float64(len(rb))
	var cov, va, vb float64
	for i := range ra {
		cov += (ra[i] - ma) * (rb[i] - mb)
		va += (ra[i] - ma) * (ra[i] - ma)
		vb += (rb[i] - mb) * (rb[i] - mb)
	}
	return cov / math.Sqrt(va*vb)
}

func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(i, j int) bool { return v[idx[i]] < v[idx[j]] })
	out := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && v[idx[j+1]] == v[idx[i]] {
			j++
		}
		for k := i; k <= j; k++ {
			out[idx[k]] = float64(i+j)/2 + 1
		}
		i = j + 1
	}
	return out
}

func TestHypergeomTail(t *testing.T) {
	// P(X >= 0) = 1; P(X >= 10) for 10 of 1,010 with 100 marked = C(100,10)/C(1010,10).
	if p := hypergeomTail(1010, 100, 10, 0); math.Abs(p-1) > 1e-9 {
		t.Errorf("P(X >= 0) = %v", p)
	}
	want := 1.0
	for i := range 10 {
		want *= float64(100-i) / float64(1010-i)
	}
	if p := hypergeomTail(1010, 100, 10, 10); math.Abs(p-want)/want > 1e-6 {
		t.Errorf("P(X >= 10) = %v, want %v", p, want)
	}
	if r := spearman([]float64{1, 2, 3, 4}, []float64{10, 20, 30, 40}); math.Abs(r-1) > 1e-12 {
		t.Errorf("spearman of a monotone pair = %v", r)
	}
	if r := spearman([]float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}); math.Abs(r+1) > 1e-12 {
		t.Errorf("spearman of a reversed pair = %v", r)
	}
}
