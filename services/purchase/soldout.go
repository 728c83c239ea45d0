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

// soldOutSubject carries "soldout" and "available" notices between instances, per item.
const soldOutSubject = "flashsale.stock."

// SoldOut is each instance's local memory of which items are sold out, so refusing the crowd
// after the last unit costs no Redis call and no network. Redis stays the authority: a flag is
// trusted for at most ttl and then checked again by one request, so a flag set just after a
// unit returned can hide that unit for at most ttl. Instances tell each other over NATS when
// an item sells out and, at once, when a unit returns.
type SoldOut struct {
	ttl     time.Duration
	notices shop.Notices
	log     *slog.Logger
	now     func() time.Time
	flags   sync.Map // item id -> *atomic.Int64 (unix nanos until which the flag holds; 0 = clear)
	stop    func()   // stops listening
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

func (s *SoldOut) flag(item int64) *atomic.Int64 {
	if v, ok := s.flags.Load(item); ok {
		return v.(*atomic.Int64)
	}
	v, _ := s.flags.LoadOrStore(item, new(atomic.Int64))
	return v.(*atomic.Int64)
}

// Is reports whether the item is known to be sold out right now.
func (s *SoldOut) Is(item int64) bool {
	v, ok := s.flags.Load(item)
	return ok && v.(*atomic.Int64).Load() > s.now().UnixNano()
}

// Mark records that Redis answered sold out for item, and tells the other instances the first
// time.
func (s *SoldOut) Mark(item int64) {
	f := s.flag(item)
	was := f.Swap(s.now().Add(s.ttl).UnixNano())
	if was <= s.now().UnixNano() {
		s.publish(item, "soldout")
	}
}

// Returned clears the flag because a unit of item went back to stock, here and everywhere.
func (s *SoldOut) Returned(item int64) {
	s.flag(item).Store(0)
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
	switch string(data) {
	case "soldout":
		f := s.flag(item)
		until := s.now().Add(s.ttl).UnixNano()
		if f.Load() < until {
			f.Store(until)
		}
	case "available":
		s.flag(item).Store(0)
	}
}

// Close stops listening.
func (s *SoldOut) Close() { s.stop() }
