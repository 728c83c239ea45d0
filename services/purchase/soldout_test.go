package purchase

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// recordedNotices keeps what the flags told the other instances.
type recordedNotices struct {
	mu   sync.Mutex
	sent []string
}

func (n *recordedNotices) Publish(subject string, data []byte) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent = append(n.sent, subject+" "+string(data))
	return nil
}

func (n *recordedNotices) Subscribe(string, func(string, []byte)) (func(), error) {
	return func() {}, nil
}

func (n *recordedNotices) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.sent)
}

var _ shop.Notices = (*recordedNotices)(nil)

// The last unit reserved refuses purchase tokens at once (not purchases: the shopper who took it
// may send the same attempt again); when the flags run out, one purchase-token request of a
// crowd is let through to check Redis and the rest are still refused; a unit reserved or
// returned clears the flags.
func TestSoldOutFlags(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	notices := &recordedNotices{}
	s, err := NewSoldOut(notices, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)), now)
	if err != nil {
		t.Fatal(err)
	}
	const item = 7
	if s.forTokens(item) != tokensClear || s.Is(item) {
		t.Fatal("an item never marked is refused")
	}

	s.Reserved(item, 3) // units left: nothing to mark
	if s.forTokens(item) != tokensClear || notices.count() != 0 {
		t.Fatalf("a reservation with 3 left marked the item (notices %d)", notices.count())
	}
	s.Reserved(item, 0) // the last unit: tokens refused at once, and the others told once
	if s.forTokens(item) != tokensHeld || s.Is(item) || notices.count() != 1 {
		t.Fatalf("the last unit reserved: tokens %v, purchases refused %v, notices %d; want tokens held, purchases not, one notice",
			s.forTokens(item), s.Is(item), notices.count())
	}

	// The flag runs out: a crowd of 200 at once, one of them is let through to check.
	clock.Add(int64(1100 * time.Millisecond))
	var through atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.forTokens(item) == tokensAskAgain {
				through.Add(1)
			}
		}()
	}
	wg.Wait()
	if through.Load() != 1 {
		t.Fatalf("%d of 200 let through when the flag ran out, want exactly 1", through.Load())
	}
	if s.forTokens(item) != tokensHeld {
		t.Fatal("the flag was not held for the others while the one checks")
	}
	s.Drained(item) // the check read 0: no new notice (the flag never lapsed for the others here)
	if notices.count() != 1 {
		t.Fatalf("notices %d after the check, want still 1", notices.count())
	}

	// A purchase refused for want of a unit refuses purchases too; when both run out, one checks.
	s.Mark(item)
	if !s.Is(item) || s.forTokens(item) != tokensHeld || notices.count() != 2 {
		t.Fatalf("after a refusal: purchases refused %v, tokens %v, notices %d", s.Is(item), s.forTokens(item), notices.count())
	}
	clock.Add(int64(1100 * time.Millisecond))
	if s.Is(item) || s.forTokens(item) != tokensAskAgain || s.forTokens(item) != tokensHeld {
		t.Fatal("when both flags ran out: want purchases through to Redis, one token request checking, the next held")
	}

	// The one checking finds a unit (it came back, its notice lost): the flags clear.
	s.Available(item)
	if s.forTokens(item) != tokensClear || s.Is(item) {
		t.Fatal("a unit seen did not clear the flags")
	}

	// A unit returned clears the flags everywhere at once.
	s.Mark(item)
	s.Drained(item)
	s.Returned(item)
	if s.forTokens(item) != tokensClear || s.Is(item) {
		t.Fatal("a returned unit left the item refused")
	}

	// The other instances' notices set the same flags here.
	s.onNotice(soldOutSubject+"8", []byte("drained"))
	s.onNotice(soldOutSubject+"9", []byte("soldout"))
	if s.forTokens(8) != tokensHeld || s.Is(8) || !s.Is(9) {
		t.Fatal("notices: want 8's tokens refused (not its purchases) and 9's purchases refused")
	}
}
