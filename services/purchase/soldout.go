package purchase

import (
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// soldOutSubject carries "soldout", "drained" and "available" notices between instances, per item.
const soldOutSubject = "flashsale.stock."

// SoldOut is each instance's local memory of which items are sold out, so refusing the crowd
// after the last unit costs no Redis call and no network. Redis stays the authority: a flag is
// trusted for at most ttl and then checked again, so a flag set just after a unit returned can
// hide that unit for at most ttl. Instances tell each other over NATS when an item sells out
// and, at once, when a unit returns.
//
// An item has two flags. The purchase flag (Mark: Redis refused a purchase for want of a unit)
// refuses purchases and purchase tokens; the token flag (Drained: the last unit was reserved)
// refuses purchase tokens only, so the same attempt sent again by the shopper who took the last
// unit still reaches Redis and is answered as the first send was.
type SoldOut struct {
	ttl     time.Duration
	notices shop.Notices
	log     *slog.Logger
	now     func() time.Time
	flags   sync.Map // item id -> *itemFlags
	stop    func()   // stops listening
}

// itemFlags are an item's two flags, each the unix nanos until which it holds (0 = clear).
type itemFlags struct {
	purchases atomic.Int64 // Mark: refuses purchases and purchase tokens
	tokens    atomic.Int64 // Drained, and the token path's checks: refuses purchase tokens
}

// NewSoldOut returns the flags, telling and hearing the other instances through notices.
func NewSoldOut(notices shop.Notices, ttl time.Duration, log *slog.Logger, now func() time.Time) (*SoldOut, error) {
	if notices == nil {
		notices = shop.NoNotices{} // an instance of its own: nothing to tell, nothing to hear
	}
	s := &SoldOut{ttl: ttl, notices: notices, log: log, now: now}
	stop, err := notices.Subscribe(soldOutSubject+"*", s.onNotice)
	if err != nil {
		return nil, err
	}
	s.stop = stop
	return s, nil
}

func (s *SoldOut) flag(item int64) *itemFlags {
	if v, ok := s.flags.Load(item); ok {
		return v.(*itemFlags)
	}
	v, _ := s.flags.LoadOrStore(item, new(itemFlags))
	return v.(*itemFlags)
}

// Is reports whether the item is known to be sold out right now (its purchase flag): a purchase
// of it is refused without asking Redis.
func (s *SoldOut) Is(item int64) bool {
	v, ok := s.flags.Load(item)
	return ok && v.(*itemFlags).purchases.Load() > s.now().UnixNano()
}

// tokenCheck is what the flags say to a purchase-token request: no flag, a flag that holds, or
// flags that have just run out, which this caller is the one to check again in Redis (the token
// flag held for the others meanwhile).
type tokenCheck int

const (
	tokensClear tokenCheck = iota
	tokensHeld
	tokensAskAgain
)

// forTokens reads the item's flags for a purchase-token request (see tokenCheck). After a
// sell-out the crowd is refused here for as long as it keeps coming: when the flags run out,
// one request checks (a compare-and-swap on the token flag's deadline) while the others are
// still refused, instead of every request being handed a token until a purchase comes back
// refused.
func (s *SoldOut) forTokens(item int64) tokenCheck {
	v, ok := s.flags.Load(item)
	if !ok {
		return tokensClear
	}
	f := v.(*itemFlags)
	now := s.now().UnixNano()
	p, t := f.purchases.Load(), f.tokens.Load()
	switch {
	case p > now || t > now:
		return tokensHeld
	case p == 0 && t == 0:
		return tokensClear
	case f.tokens.CompareAndSwap(t, now+int64(s.ttl)):
		return tokensAskAgain
	}
	return tokensHeld // another request is checking
}

// Mark records that Redis refused a purchase of item for want of a unit, and tells the other
// instances the first time.
func (s *SoldOut) Mark(item int64) {
	f := s.flag(item)
	was := f.purchases.Swap(s.now().Add(s.ttl).UnixNano())
	if was <= s.now().UnixNano() {
		s.publish(item, "soldout")
	}
}

// Drained records that Redis showed no unit of item left (the last one reserved, or its stock
// read as 0): purchase tokens are refused for ttl, here and (the first time) on the other
// instances.
func (s *SoldOut) Drained(item int64) {
	f := s.flag(item)
	was := f.tokens.Swap(s.now().Add(s.ttl).UnixNano())
	if was <= s.now().UnixNano() {
		s.publish(item, "drained")
	}
}

// Reserved records that Redis reserved a unit of item, left units remaining after it: the last
// unit drains the item at once (the next shopper is refused at the token step, before anyone is
// refused a purchase); any other clears the flags this instance still held.
func (s *SoldOut) Reserved(item, left int64) {
	if left <= 0 {
		s.Drained(item)
		return
	}
	s.Available(item)
}

// Available clears this instance's flags of item: Redis showed a unit of it (no notice: the
// other instances check for themselves when their flags run out).
func (s *SoldOut) Available(item int64) {
	if v, ok := s.flags.Load(item); ok {
		f := v.(*itemFlags)
		if f.purchases.Load() != 0 || f.tokens.Load() != 0 {
			f.purchases.Store(0)
			f.tokens.Store(0)
		}
	}
}

// Returned clears the flags because a unit of item went back to stock, here and everywhere.
func (s *SoldOut) Returned(item int64) {
	f := s.flag(item)
	f.purchases.Store(0)
	f.tokens.Store(0)
	s.publish(item, "available")
}

func (s *SoldOut) publish(item int64, what string) {
	if err := s.notices.Publish(soldOutSubject+strconv.FormatInt(item, 10), []byte(what)); err != nil {
		s.log.Warn("sold-out notice not sent", "item", item, "err", err)
	}
}

func (s *SoldOut) onNotice(subject string, data []byte) {
	item, err := strconv.ParseInt(strings.TrimPrefix(subject, soldOutSubject), 10, 64)
	if err != nil {
		return
	}
	extend := func(a *atomic.Int64) {
		if until := s.now().Add(s.ttl).UnixNano(); a.Load() < until {
			a.Store(until)
		}
	}
	switch string(data) {
	case "soldout":
		extend(&s.flag(item).purchases)
	case "drained":
		extend(&s.flag(item).tokens)
	case "available":
		f := s.flag(item)
		f.purchases.Store(0)
		f.tokens.Store(0)
	}
}

// Close stops listening.
func (s *SoldOut) Close() { s.stop() }
