package catalog

import (
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// saleSubject carries "changed" notices between instances, per sale: a merchant's edit, pause,
// resume or end on one instance makes every other instance drop its cached view of that sale at
// once, instead of trusting it for up to catalogTTL (a lost notice falls back to that).
const saleSubject = "flashsale.sale."

// pausedTTL is how long this instance trusts Redis's answer to "is the sale paused?" on the
// purchase-token path. A pause reaches the other instances' caches through the notice at once
// (the reserve script refuses a purchase of a paused sale in Redis regardless); the TTL bounds a
// lost notice.
const pausedTTL = time.Second

// hearChanges makes this instance forget its cached view of a sale when another instance tells
// that a merchant changed it.
func (s *Sales) hearChanges() error {
	_, err := s.notices.Subscribe(saleSubject+"*", func(subject string, data []byte) {
		id, err := strconv.ParseInt(strings.TrimPrefix(subject, saleSubject), 10, 64)
		if err == nil && id > 0 {
			s.forgetID(id, itemsOfNotice(data))
		}
	})
	return err
}

// announce tells the other instances that the sale changed (best effort: see saleSubject). The
// notice carries the sale's item ids, comma-separated, so that a receiver drops its cached
// items even where it holds no row of the sale (or an older one, without an item just added).
func (s *Sales) announce(row shop.Sale) {
	var b []byte
	for i, it := range row.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, it.ID, 10)
	}
	if err := s.notices.Publish(saleSubject+strconv.FormatInt(row.ID, 10), b); err != nil {
		s.log.Warn("sale change notice not sent; other instances catch up within their cache's TTL", "sale", row.ID, "err", err)
	}
}

// itemsOfNotice reads the item ids of a notice (bad entries skipped).
func itemsOfNotice(data []byte) []int64 {
	var ids []int64
	for f := range strings.SplitSeq(string(data), ",") {
		if id, err := strconv.ParseInt(f, 10, 64); err == nil && id > 0 {
			ids = append(ids, id)
		}
	}
	return ids
}

// forgetID drops this instance's cached view of a sale known by its id: its items are those the
// notice names and those of the cached row, if one is held.
func (s *Sales) forgetID(saleID int64, items []int64) {
	row := shop.Sale{ID: saleID}
	if c, ok := s.salesCache.Peek(saleID); ok {
		row.Items = c.sale.Items
	}
	for _, id := range items {
		row.Items = append(row.Items, shop.Item{ID: id})
	}
	s.forget(row)
}
