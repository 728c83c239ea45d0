package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale/loadgen/tokens"
)

// TokenPath is the path of a sale's purchase-token call.
func TokenPath(saleID int64) []byte {
	return []byte("/api/flash-sales/" + strconv.FormatInt(saleID, 10) + "/purchase-token")
}

// PurchasePath is the path of an item's purchase call.
func PurchasePath(itemID int64) []byte {
	return []byte("/api/flash-sales/items/" + strconv.FormatInt(itemID, 10) + "/purchase")
}

// PurchasePaths are the purchase paths of items, in order.
func PurchasePaths(itemIDs []int64) [][]byte {
	out := make([][]byte, len(itemIDs))
	for i, id := range itemIDs {
		out[i] = PurchasePath(id)
	}
	return out
}

// tokenBody is the purchase-token call's body: the test captcha's answer.
var tokenBody = []byte(`{"captchaId":"bench","answer":"test"}`)

// TokenBody is a purchase-token call's body answering challenge captchaID with answer (the fire
// drill's shoppers answer the drill's own challenge).
func TokenBody(captchaID, answer string) []byte {
	b, _ := json.Marshal(map[string]string{"captchaId": captchaID, "answer": answer})
	return b
}

// doubleClicks tells whether shopper i clicks twice: a fixed, evenly spread fraction.
func doubleClicks(i int, frac float64) bool {
	if frac <= 0 {
		return false
	}
	h := uint32(i) * 2654435761 // Knuth's multiplicative hash
	return float64(h)/float64(math.MaxUint32) < frac
}

// What an arrival of the shopper flow sent besides its first token request, recorded so the
// reference run can send the same requests (the issue compares times for the same number of
// requests: a shopper flashsale refuses at the token step costs one request, not two).
const (
	patToken2   = 1 << iota // a second token (a double-clicker)
	patPurchase             // a purchase
	patDup                  // a second purchase at the same time
)

// ShopperFlow is one shopper's whole visit, as in the rush and the ladder: fetch a purchase
// token (the test captcha's answer is "test", so the captcha request itself is skipped: it is
// a static challenge, not part of the contested path), then buy; a double-clicker fetches a
// second token and sends both purchases at once on two connections (refused the second token,
// it buys once, with the first). Arrival i buys the item of
// buyPaths[i % len(buyPaths)] (a sale of several items, the crowd spread evenly over them). With replay set, arrival i
// sends exactly the requests replay[i] names, whatever the answers; with record set, what
// arrival i sent is written to record[i].
func ShopperFlow(users *tokens.Arena, tokPath []byte, buyPaths [][]byte, frac float64, record, replay []uint8) func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
	return ShopperFlowWith(tokenBody, users, tokPath, buyPaths, frac, record, replay)
}

// ShopperFlowWith is ShopperFlow whose purchase-token calls send body (TokenBody) instead of the
// test captcha's answer.
func ShopperFlowWith(body []byte, users *tokens.Arena, tokPath []byte, buyPaths [][]byte, frac float64, record, replay []uint8) func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
	return func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
		jwt := users.Get(i % users.Len())
		buyPath := buyPaths[i%len(buyPaths)]
		var pat uint8
		want := func(bit uint8, ok bool) bool {
			if replay != nil {
				return replay[i]&bit != 0
			}
			return ok
		}
		w.req = request{method: "POST", path: tokPath, bearer: jwt, body: body}
		cl, answer, end := exchange(w.c1, &w.req, s, KindToken, deadline)
		final := cl
		w.tok1 = append(w.tok1[:0], jsonString(answer, "purchaseToken")...)
		dbl := want(patToken2, cl == Class200 && doubleClicks(i, frac))
		if dbl {
			pat |= patToken2
			cl2, body2, _ := exchange(w.c1, &w.req, s, KindToken, deadline)
			w.tok2 = append(w.tok2[:0], jsonString(body2, "purchaseToken")...)
			// a second token refused: the shopper still buys with the first, once
			dbl = cl2 == Class200
		}
		if want(patPurchase, final == Class200) {
			pat |= patPurchase
			w.req = request{method: "POST", path: buyPath, bearer: jwt, ptoken: w.tok1}
			if want(patDup, dbl) {
				pat |= patDup
				final, end = doubleClick(w, s, jwt, buyPath, deadline)
			} else {
				var b []byte
				final, b, end = exchange(w.c1, &w.req, s, KindPurchase, deadline)
				if final == Class202 {
					w.acked = append(w.acked, string(jsonString(b, "orderId")))
				}
			}
		}
		if record != nil {
			record[i] = pat
		}
		s.record(KindArrival, final, end.Sub(sched), int64(end.Sub(s.base)))
	}
}

// doubleClick sends w.req (first token) and the same purchase with the second token at once.
func doubleClick(w *Worker, s *Stats, jwt, buyPath []byte, deadline time.Time) (Class, time.Time) {
	req2 := request{method: "POST", path: buyPath, bearer: jwt, ptoken: w.tok2}
	t0 := time.Now()
	err1 := w.c1.Send(&w.req, deadline)
	err2 := w.c2.Send(&req2, deadline)
	var cls [2]Class
	var end time.Time
	for j, c := range []conn{w.c1, w.c2} {
		k, err := KindPurchase, err1
		if j == 1 {
			k, err = KindDup, err2
		}
		if err != nil {
			t := time.Now()
			cls[j] = ClassOf(0, err)
			s.record(k, cls[j], t.Sub(t0), int64(t.Sub(s.base)))
			end = t
			continue
		}
		cl, b, t := finish(c, s, k, t0)
		cls[j], end = cl, t
		if cl == Class202 {
			w.acked = append(w.acked, string(jsonString(b, "orderId")))
		}
	}
	// the shopper's outcome: a unit if either click won, else an error if either failed
	switch {
	case cls[0] == Class202 || cls[1] == Class202:
		return Class202, end
	case IsError(cls[0]):
		return cls[0], end
	case IsError(cls[1]):
		return cls[1], end
	}
	return cls[0], end
}

// PurchaseOnly is an arrival that only buys, with a purchase token fetched beforehand: the
// refusal path (soldout) or the winning path (reserve) alone.
func PurchaseOnly(users, toks *tokens.Arena, buyPath []byte) func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
	return func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
		w.req = request{method: "POST", path: buyPath, bearer: users.Get(i % users.Len()), ptoken: toks.Get(i % toks.Len())}
		cl, b, end := exchange(w.c1, &w.req, s, KindPurchase, deadline)
		if cl == Class202 {
			w.acked = append(w.acked, string(jsonString(b, "orderId")))
		}
		s.record(KindArrival, cl, end.Sub(sched), int64(end.Sub(s.base)))
	}
}

// Prefetch fetches one purchase token per user before a purchase-only phase (closed loop, as
// fast as the server answers), retrying refused ones twice. It returns the tokens and the
// earliest expiry seen (sampled; zero if none was read).
func Prefetch(ctx context.Context, pool *Pool, users *tokens.Arena, saleID int64, maxWait time.Duration, prog *Progress) (*tokens.Arena, time.Time, error) {
	n := users.Len()
	toks := tokens.NewSlots(n, 96)
	path := TokenPath(saleID)
	var minExp int64 = math.MaxInt64
	var expMu sync.Mutex
	do := func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
		w.req = request{method: "POST", path: path, bearer: users.Get(i), body: tokenBody}
		cl, body, _ := exchange(w.c1, &w.req, s, KindToken, deadline)
		if cl != Class200 {
			return
		}
		toks.Set(i, jsonString(body, "purchaseToken"))
		if i%64 == 0 { // the earliest expiry, sampled
			if t, err := time.Parse(time.RFC3339Nano, string(jsonString(body, "expiresAt"))); err == nil {
				expMu.Lock()
				minExp = min(minExp, t.UnixNano())
				expMu.Unlock()
			}
		}
	}
	for attempt := 0; attempt < 3; attempt++ {
		var idx []time.Duration
		var which []int
		for i := range n {
			if len(toks.Get(i)) == 0 {
				which = append(which, i)
				idx = append(idx, 0)
			}
		}
		if len(which) == 0 {
			break
		}
		ph := &Phase{Name: "prefetch tokens", Base: time.Now(), Offsets: idx, Deadline: maxWait + time.Minute,
			Do: func(w *Worker, s *Stats, j int, sched, deadline time.Time) { do(w, s, which[j], sched, deadline) }}
		st := pool.Run(ctx, ph, prog)
		if ctx.Err() != nil {
			return nil, time.Time{}, ctx.Err()
		}
		if bad := int64(len(which)) - st.Count(KindToken, Class200); bad > 0 && attempt == 2 {
			return nil, time.Time{}, fmt.Errorf("prefetch: %d of %d purchase tokens refused (%s)", bad, n, st.CodesLine(KindToken))
		}
	}
	var earliest time.Time
	if minExp != math.MaxInt64 {
		earliest = time.Unix(0, minExp)
	}
	return toks, earliest, nil
}

// CodesLine sums up the outcomes and error codes of Kind k, as "200:5 410:3 SOLD_OUT:3".
func (s *Stats) CodesLine(k Kind) string {
	var parts []string
	for c := Class(0); c < NumClasses; c++ {
		if n := s.Count(k, c); n > 0 {
			parts = append(parts, ClassNames[c]+":"+strconv.FormatInt(n, 10))
		}
	}
	for i, name := range CodeNames {
		if n := s.codes[k][i].Load(); n > 0 {
			parts = append(parts, name+":"+strconv.FormatInt(n, 10))
		}
	}
	return strings.Join(parts, " ")
}
