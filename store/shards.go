package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/redis/go-redis/v9"
)

// A sharded sale (K > 1 stock shards) keeps K copies of the sale's key set, each under its own
// hash tag, so each lands on its own Redis Cluster slot: shard 0 is {sale:S} (a sale of K = 1 is
// exactly the unsharded layout), shard k > 0 is {sale:S:k}. Every shard holds a part of every
// item's stock, its own meta (the same fields; its own reservation counter), buyers, in-flight
// register, tokens and tombstones. A shopper belongs to one shard (ShardOf), so every check of
// one shopper (one per shopper in the sale, one attempt per token) is still one script in one
// slot.

// shardTag is the hash tag of one shard of a sale.
func shardTag(saleID int64, shard int) string {
	if shard == 0 {
		return saleTag(saleID)
	}
	return "{sale:" + strconv.FormatInt(saleID, 10) + ":" + strconv.Itoa(shard) + "}"
}

// ShardTag is the hash tag of shard k of a sale ({sale:S} for shard 0, {sale:S:k} otherwise).
func ShardTag(saleID int64, shard int) string { return shardTag(saleID, shard) }

// MetaKeyOf is MetaKey of one shard.
func MetaKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":meta" }

// StockKeyOf is StockKey of one shard: its part of the item's units.
func StockKeyOf(saleID int64, shard int, itemID int64) string {
	return shardTag(saleID, shard) + ":stock:" + strconv.FormatInt(itemID, 10)
}

// BuyersKeyOf is BuyersKey of one shard: the buyers pinned to it.
func BuyersKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":buyers" }

// InFlightKeyOf is InFlightKey of one shard.
func InFlightKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":inflight" }

// GoneKeyOf is GoneKey of one shard.
func GoneKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":gone" }

// XferKeyOf is the log of a shard's transfers out not yet completed (transfer id -> record).
func XferKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":xfer" }

// XferOutKeyOf is the hash of the transfer ids a shard has sent out (id -> "n:epoch:seq", kept 30
// days): a resent out of the same id answers the same and takes nothing more.
func XferOutKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":xferout" }

// XferInKeyOf is the set of transfer ids a shard has taken in (tombstones, kept 30 days).
func XferInKeyOf(saleID int64, shard int) string { return shardTag(saleID, shard) + ":xferin" }

// ShardOf pins a shopper to one of k shards: a fixed mix (splitmix64's finalizer) of the user id,
// modulo k. It never changes for a sale, since k is fixed at the sale's creation.
func ShardOf(userID int64, k int) int {
	if k <= 1 {
		return 0
	}
	x := uint64(userID) + 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(k))
}

// SplitUnits splits n units over k shards: an even split, the remainder to the lowest shards.
func SplitUnits(n int64, k int) []int64 {
	out := make([]int64, k)
	if n <= 0 {
		return out
	}
	for i := range out {
		out[i] = n / int64(k)
		if int64(i) < n%int64(k) {
			out[i]++
		}
	}
	return out
}

// ShardCounter tells how many stock shards a sale has (fixed at its creation).
type ShardCounter func(ctx context.Context, saleID int64) (int, error)

// shardCache remembers each sale's shard count: it never changes once the sale exists.
type shardCache struct {
	m  sync.Map // sale id -> int
	fn ShardCounter
}

func (c *shardCache) get(ctx context.Context, saleID int64) (int, error) {
	if v, ok := c.m.Load(saleID); ok {
		return v.(int), nil
	}
	if c.fn == nil {
		return 1, nil
	}
	k, err := c.fn(ctx, saleID)
	if err != nil {
		return 0, err
	}
	if k < 1 || k > shop.MaxStockShards {
		return 0, fmt.Errorf("sale %d: %d stock shards", saleID, k)
	}
	c.m.Store(saleID, k)
	return k, nil
}

// SetShardCounter tells the Stock how to learn a sale's shard count (Postgres: DB.StockShards).
// Without one, every sale has one shard.
func (s *Stock) SetShardCounter(fn ShardCounter) { s.shards.fn = fn }

// RememberShards records a sale's shard count (known from a snapshot or a row already read).
func (s *Stock) RememberShards(saleID int64, k int) {
	if k >= 1 && k <= shop.MaxStockShards {
		s.shards.m.Store(saleID, k)
	}
}

// Shards returns a sale's stock shard count.
func (s *Stock) Shards(ctx context.Context, saleID int64) (int, error) {
	return s.shards.get(ctx, saleID)
}

// ShardOfUser returns the shard a shopper is pinned to in a sale.
func (s *Stock) ShardOfUser(ctx context.Context, saleID, userID int64) (int, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return 0, err
	}
	return ShardOf(userID, k), nil
}

var errNoSale = errors.New("no such sale")

// StockShards reads a sale's stock shard count from Postgres.
func (d *DB) StockShards(ctx context.Context, saleID int64) (int, error) {
	var k []int
	if err := d.g.WithContext(ctx).Raw(`SELECT stock_shards FROM sales WHERE id = ?`, saleID).Scan(&k).Error; err != nil {
		return 0, fmt.Errorf("stock shards(sale %d): %w", saleID, err)
	}
	if len(k) == 0 {
		return 0, fmt.Errorf("stock shards(sale %d): %w", saleID, errNoSale)
	}
	return k[0], nil
}

// MaxSeqOfShards returns, per shard of a sharded sale, the highest reservation seq Postgres holds.
func (d *DB) MaxSeqOfShards(ctx context.Context, saleID int64, k int) ([]int64, error) {
	var rows []struct {
		Shard  int
		MaxSeq int64
	}
	err := d.g.WithContext(ctx).Raw(`SELECT s.shard, max(s.max_seq) AS max_seq FROM item_shard_seqs s JOIN items i ON i.id = s.item_id
		WHERE i.sale_id = ? GROUP BY s.shard`, saleID).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("max seq of shards(sale %d): %w", saleID, err)
	}
	out := make([]int64, k)
	for _, r := range rows {
		if r.Shard >= 0 && r.Shard < k {
			out[r.Shard] = r.MaxSeq
		}
	}
	return out, nil
}

// Transfer is one record of a shard's transfer log: n units of an item on their way to another
// shard (taken from the donor, not yet confirmed as added to the receiver).
type Transfer struct {
	ID       string
	From, To int
	ItemID   int64
	N        int64
	Epoch    int64
	At       time.Time // Redis's clock when the units left the donor
	Applied  bool      // the receiver has taken it (only the record's deletion is left)
	Seq      int64     // the donor's seq after its step (0: a record written before seqs were)
	RecvSeq  int64     // the receiver's seq the donor had recorded at its step (0: unknown)
}

func parseTransfer(id string, from int, v string) (Transfer, bool) {
	p := strings.Split(v, ":")
	if len(p) != 5 && len(p) != 6 {
		return Transfer{}, false
	}
	var n [6]int64
	for i, x := range p {
		y, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return Transfer{}, false
		}
		n[i] = y
	}
	return Transfer{ID: id, From: from, To: int(n[0]), ItemID: n[1], N: n[2], Epoch: n[3], At: time.UnixMilli(n[4]), Seq: n[5]}, true
}

func newTransferID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// TransferOut is the donor's step of a transfer: it takes up to n units of the item from shard
// from, for shard to, and records them in from's log. It returns the record (N 0: nothing taken).
// Tests call it alone to play a process killed before the receiver's step.
func (s *Stock) TransferOut(ctx context.Context, saleID int64, from, to int, itemID, n int64) (Transfer, error) {
	return s.transferOut(ctx, newTransferID(), saleID, from, to, itemID, n)
}

// transferOut is TransferOut with a given transfer id. The donor's step runs once per id: a
// second run (go-redis resends a script whose reply it lost) takes nothing more and answers what
// the first took.
func (s *Stock) transferOut(ctx context.Context, id string, saleID int64, from, to int, itemID, n int64) (Transfer, error) {
	res, err := s.transfer.Run(ctx, s.rdb, []string{MetaKeyOf(saleID, from), StockKeyOf(saleID, from, itemID), XferKeyOf(saleID, from),
		XferOutKeyOf(saleID, from)}, "out", id, to, itemID, n).Int64Slice()
	if err != nil {
		return Transfer{}, fmt.Errorf("transfer out(sale %d, shard %d): %w", saleID, from, err)
	}
	if len(res) != 4 {
		return Transfer{}, fmt.Errorf("transfer out(sale %d, shard %d): unexpected reply %v", saleID, from, res)
	}
	return Transfer{ID: id, From: from, To: to, ItemID: itemID, N: res[0], Epoch: res[1], Seq: res[2], RecvSeq: res[3]}, nil
}

// Transfer outcomes of the receiver's step.
const (
	TransferApplied = 1  // added now
	TransferAgain   = 0  // added before
	TransferHeld    = -1 // the receiver is not held healthy: keep the record (a rebuild drops it)
	TransferStale   = -2 // the sale was rebuilt since the units left: the snapshot counted them
	// TransferLoss: the receiver's seq is below what the donor recorded of it (it lost writes,
	// a failover): the sale is marked lost (every shard) and the record kept (the rebuild drops it).
	TransferLoss = -3
)

// CompleteTransfer runs the receiver's step and then deletes the donor's record (unless the
// receiver cannot take it yet). Idempotent: the receiver adds the units at most once. Each step
// records the other shard's seq it saw (see TransferSeqLoss); a receiver found behind what the
// donor saw of it fails the sale closed (TransferLoss).
func (s *Stock) CompleteTransfer(ctx context.Context, saleID int64, t Transfer) (int, error) {
	res, err := s.transfer.Run(ctx, s.rdb, []string{MetaKeyOf(saleID, t.To), StockKeyOf(saleID, t.To, t.ItemID), XferInKeyOf(saleID, t.To)},
		"in", t.ID, t.N, t.Epoch, t.From, t.Seq, t.RecvSeq).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("transfer in(sale %d, shard %d): %w", saleID, t.To, err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("transfer in(sale %d, shard %d): unexpected reply %v", saleID, t.To, res)
	}
	r, rseq := int(res[0]), res[1]
	switch r {
	case TransferHeld:
		return r, nil
	case TransferLoss:
		if _, err := s.MarkLost(context.WithoutCancel(ctx), saleID, 0, ""); err != nil {
			return r, fmt.Errorf("transfer in(sale %d, shard %d): shard behind: %w", saleID, t.To, err)
		}
		return r, nil
	}
	if err := s.transfer.Run(ctx, s.rdb, []string{XferKeyOf(saleID, t.From), MetaKeyOf(saleID, t.From)}, "done", t.ID, t.To, rseq).Err(); err != nil {
		return r, fmt.Errorf("transfer done(sale %d, shard %d): %w", saleID, t.From, err)
	}
	return r, nil
}

// Transfers lists the transfer records of every shard of a sale, each marked Applied when its
// receiver already holds it. A record not applied is units in transit.
func (s *Stock) Transfers(ctx context.Context, saleID int64) ([]Transfer, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil || k == 1 {
		return nil, err
	}
	logs, err := s.hashesOf(ctx, saleID, k, XferKeyOf)
	if err != nil {
		return nil, fmt.Errorf("transfers(sale %d): %w", saleID, err)
	}
	var out []Transfer
	for sh, records := range logs {
		for id, v := range records {
			if t, ok := parseTransfer(id, sh, v); ok {
				out = append(out, t)
			}
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	applied := make([]*redis.BoolCmd, len(out))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range out {
			applied[i] = p.SIsMember(ctx, XferInKeyOf(saleID, t.To), t.ID)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("transfers(sale %d): %w", saleID, err)
	}
	for i := range out {
		out[i].Applied = applied[i].Val()
	}
	slices.SortFunc(out, func(a, b Transfer) int { return a.At.Compare(b.At) })
	return out, nil
}

// CompleteTransfers finishes every transfer of a sale left half-done (a process killed between
// the donor's and the receiver's step). It returns how many it completed.
func (s *Stock) CompleteTransfers(ctx context.Context, saleID int64) (int, error) {
	ts, err := s.Transfers(ctx, saleID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range ts {
		r, err := s.CompleteTransfer(ctx, saleID, t)
		if err != nil {
			return n, err
		}
		if r != TransferHeld && r != TransferLoss {
			n++
		}
	}
	return n, nil
}

// borrow moves units of an item into shard to from the shard holding the most, taking half of
// what that one holds (at least one). It reports whether units arrived, and the donor's step
// (N 0: none taken). A failure after the donor's step leaves the record for the keeper: no unit
// is stranded.
func (s *Stock) borrow(ctx context.Context, saleID int64, k, to int, itemID int64) (bool, Transfer, error) {
	levels, err := s.shardLevels(ctx, saleID, k, itemID)
	if err != nil {
		return false, Transfer{}, err
	}
	order := make([]int, 0, k)
	for sh := range k {
		if sh != to && levels[sh] > 0 {
			order = append(order, sh)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return int(levels[b] - levels[a]) })
	for _, from := range order {
		t, err := s.TransferOut(ctx, saleID, from, to, itemID, (levels[from]+1)/2)
		if err != nil {
			return false, Transfer{}, err
		}
		if t.N == 0 {
			continue // taken meanwhile
		}
		r, err := s.CompleteTransfer(ctx, saleID, t)
		if err != nil {
			return false, t, err
		}
		return r == TransferApplied || r == TransferAgain, t, nil
	}
	return false, Transfer{}, nil
}

// shardLevels reads an item's units in every shard (-1: no key).
func (s *Stock) shardLevels(ctx context.Context, saleID int64, k int, itemID int64) ([]int64, error) {
	cmds := make([]*redis.StringCmd, k)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range k {
			cmds[sh] = p.Get(ctx, StockKeyOf(saleID, sh, itemID))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("shard levels(sale %d, item %d): %w", saleID, itemID, err)
	}
	out := make([]int64, k)
	for i, c := range cmds {
		v, err := c.Int64()
		if err != nil {
			v = -1
		}
		out[i] = v
	}
	return out, nil
}

// allEmpty reports whether no shard holds a unit of the item and no transfer of the sale is in
// flight: only then is the item sold out everywhere. The shards cannot be read in one atomic
// step, so the transfer logs and counters are read before and after the levels: no record
// before and no transfer started until after means no unit moved while the levels were read.
func (s *Stock) allEmpty(ctx context.Context, saleID int64, k int, itemID int64) (bool, error) {
	moves := func() (string, error) {
		counts := make([]*redis.StringCmd, k)
		logs := make([]*redis.IntCmd, k)
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for sh := range k {
				counts[sh] = p.HGet(ctx, MetaKeyOf(saleID, sh), "xfers")
				logs[sh] = p.HLen(ctx, XferKeyOf(saleID, sh))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", err
		}
		var b strings.Builder
		for sh := range k {
			if logs[sh].Val() > 0 {
				return "", nil // a transfer in flight
			}
			b.WriteString(counts[sh].Val() + ",")
		}
		return b.String(), nil
	}
	before, err := moves()
	if err != nil || before == "" {
		return false, err
	}
	levels, err := s.shardLevels(ctx, saleID, k, itemID)
	if err != nil {
		return false, err
	}
	for _, v := range levels {
		if v > 0 {
			return false, nil
		}
	}
	after, err := moves()
	return err == nil && after == before, err
}

// shardedLevels sums each item's units over the shards (-1: no shard holds the item's key).
func (s *Stock) shardedLevels(ctx context.Context, saleID int64, k int, itemIDs []int64) ([]int64, error) {
	cmds := make([]*redis.StringCmd, k*len(itemIDs))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range itemIDs {
			for sh := range k {
				cmds[i*k+sh] = p.Get(ctx, StockKeyOf(saleID, sh, id))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("stock levels: %w", err)
	}
	out := make([]int64, len(itemIDs))
	for i := range itemIDs {
		out[i] = -1
		for sh := range k {
			v, err := cmds[i*k+sh].Int64()
			switch {
			case errors.Is(err, redis.Nil):
			case err != nil:
				return nil, fmt.Errorf("stock level(item %d): %w", itemIDs[i], err)
			default:
				out[i] = max(out[i], 0) + v
			}
		}
	}
	return out, nil
}

// adjustSharded applies an edit to every shard of a sharded sale. A decrease is taken first,
// from the shards holding the most, each step atomic in its shard; if the units are not there
// (sold or reserved meanwhile) every step taken is given back and the edit is refused as a
// whole (ErrAdjustTooLow). Then each shard takes the meta fields and its part of the increases
// and of an added item's units. Every step is marked in its shard under its own name (the
// edit's ID; ID:d:I for the decrease of item I, ID:g:I for its give-back), so a resent step is
// applied once. A step whose outcome is unknown (an error, not an answer), a give-back that did
// not happen, or a shard found not held healthy after another shard took a step leaves the sale
// in parts: it is marked lost (fail closed), its rebuild reads Postgres, where the edit's
// transaction rolls back (or, committed, has the edit).
func (s *Stock) adjustSharded(ctx context.Context, a Adjustment, k int) (AdjustResult, error) {
	states, err := s.shardStates(ctx, a.SaleID, k)
	if err != nil {
		return AdjustResult{}, err
	}
	for _, st := range states {
		if !st.Loaded || st.Lost {
			return AdjustResult{}, nil // not held healthy: the next load reads Postgres
		}
	}
	e := &shardedEdit{s: s, ctx: ctx, a: a, k: k}
	for _, st := range a.Stock {
		if st.Initial != nil || st.Delta >= 0 {
			continue
		}
		if res, ended, err := e.decrease(st); ended {
			return res, err
		}
	}
	return e.increase()
}

// shardedEdit is one edit of a sharded sale on its way through the shards (adjustSharded).
type shardedEdit struct {
	s     *Stock
	ctx   context.Context
	a     Adjustment
	k     int
	taken []takenStep // the decreases taken so far
}

// takenStep is a decrease one shard took.
type takenStep struct {
	sh    int
	item  int64
	delta int64
}

func (e *shardedEdit) notHeld(sh int) error {
	return fmt.Errorf("adjust(sale %d): shard %d no longer held", e.a.SaleID, sh)
}

// step applies one shard's part under its mark name; a shard found not held is an error.
func (e *shardedEdit) step(part Adjustment, sh int, mark string) error {
	r, err := e.s.adjustShard(e.ctx, part, sh, mark)
	if err == nil && !r.Applied {
		err = e.notHeld(sh)
	}
	return err
}

func (e *shardedEdit) failClosed(err error) (AdjustResult, error) {
	return e.s.failAdjust(e.ctx, e.a.SaleID, err)
}

// giveBack gives back every decrease taken; an error: some may not have gone back.
func (e *shardedEdit) giveBack() error {
	var errs []error
	for _, t := range e.taken {
		part := Adjustment{SaleID: e.a.SaleID, Stock: []StockAdjust{{ItemID: t.item, Delta: -t.delta}}}
		if err := e.step(part, t.sh, e.a.ID+":g:"+strconv.FormatInt(t.item, 10)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// refuse gives the decreases taken back and answers res, err: nothing changed. A give-back that
// did not happen fails the sale closed.
func (e *shardedEdit) refuse(res AdjustResult, err error) (AdjustResult, error) {
	if gerr := e.giveBack(); gerr != nil {
		return e.failClosed(errors.Join(err, gerr))
	}
	return res, err
}

// decrease takes an item's decrease from the shards holding the most; ended: the edit ends with
// res, err instead (refused, every decrease given back, or failed closed).
func (e *shardedEdit) decrease(st StockAdjust) (res AdjustResult, ended bool, err error) {
	levels, err := e.s.shardLevels(e.ctx, e.a.SaleID, e.k, st.ItemID)
	if err != nil {
		res, err = e.refuse(AdjustResult{}, err)
		return res, true, err
	}
	order := make([]int, e.k)
	total := int64(0)
	for sh := range e.k {
		order[sh] = sh
		total += max(levels[sh], 0)
	}
	need := -st.Delta
	if total < need {
		res, err = e.refuse(AdjustResult{ItemID: st.ItemID, Left: total}, ErrAdjustTooLow)
		return res, true, err
	}
	slices.SortFunc(order, func(x, y int) int { return int(levels[y] - levels[x]) })
	for _, sh := range order {
		d := min(max(levels[sh], 0), need)
		if d == 0 {
			continue
		}
		part := Adjustment{SaleID: e.a.SaleID, Stock: []StockAdjust{{ItemID: st.ItemID, Delta: -d}}}
		err := e.step(part, sh, e.a.ID+":d:"+strconv.FormatInt(st.ItemID, 10))
		if errors.Is(err, ErrAdjustTooLow) {
			continue // taken meanwhile: try the next shard
		}
		if err != nil {
			// Redis may have taken these units (or the shard is gone): fail closed.
			res, err = e.failClosed(errors.Join(err, e.giveBack()))
			return res, true, err
		}
		e.taken = append(e.taken, takenStep{sh, st.ItemID, -d})
		need -= d
		if need == 0 {
			return AdjustResult{}, false, nil
		}
	}
	res, err = e.refuse(AdjustResult{ItemID: st.ItemID, Left: total - (-st.Delta - need)}, ErrAdjustTooLow)
	return res, true, err
}

// increase gives each shard the meta fields and its part of the increases and of an added
// item's units.
func (e *shardedEdit) increase() (AdjustResult, error) {
	for sh := range e.k {
		part := Adjustment{SaleID: e.a.SaleID, Meta: e.a.Meta}
		for _, st := range e.a.Stock {
			switch {
			case st.Initial != nil:
				n := SplitUnits(*st.Initial, e.k)[sh]
				part.Stock = append(part.Stock, StockAdjust{ItemID: st.ItemID, Initial: &n})
			case st.Delta > 0:
				part.Stock = append(part.Stock, StockAdjust{ItemID: st.ItemID, Delta: SplitUnits(st.Delta, e.k)[sh]})
			}
		}
		r, err := e.s.adjustShard(e.ctx, part, sh, e.a.ID)
		if err != nil {
			return e.failClosed(err) // its outcome is unknown
		}
		if !r.Applied {
			if sh == 0 {
				return e.refuse(AdjustResult{}, e.notHeld(sh)) // no shard took a part of this phase
			}
			return e.failClosed(e.notHeld(sh))
		}
	}
	return AdjustResult{Applied: true}, nil
}

// StockShardsCached is StockShards, remembered: a sale's shard count never changes.
func (d *DB) StockShardsCached(ctx context.Context, saleID int64) (int, error) {
	if v, ok := d.shards.Load(saleID); ok {
		return v.(int), nil
	}
	k, err := d.StockShards(ctx, saleID)
	if err != nil {
		return 0, err
	}
	d.shards.Store(saleID, k)
	return k, nil
}

// transferCounts reads, per shard, how many transfers ever left it (meta's xfers), the records
// in its log and the transfers it took in: the answer changes with every step of every
// transfer (out, in, done), so two equal answers mean no unit moved between them.
func (s *Stock) transferCounts(ctx context.Context, saleID int64, k int) (string, error) {
	counts := make([]*redis.StringCmd, k)
	logs := make([]*redis.IntCmd, k)
	ins := make([]*redis.IntCmd, k)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range k {
			counts[sh] = p.HGet(ctx, MetaKeyOf(saleID, sh), "xfers")
			logs[sh] = p.HLen(ctx, XferKeyOf(saleID, sh))
			ins[sh] = p.SCard(ctx, XferInKeyOf(saleID, sh))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("transfer counts(sale %d): %w", saleID, err)
	}
	var b strings.Builder
	for sh := range k {
		fmt.Fprintf(&b, "%s/%d/%d,", counts[sh].Val(), logs[sh].Val(), ins[sh].Val())
	}
	return b.String(), nil
}

// SeqLoss is a shard found behind what another shard recorded of it at a transfer.
type SeqLoss struct {
	Shard    int   // the shard that lost writes
	Seq      int64 // its seq now
	SeenBy   int   // the shard that recorded more
	Recorded int64 // what that shard recorded of it
}

// TransferSeqLoss tells whether a step of a transfer between the shards of a sharded sale was
// lost (a Redis Cluster master failed before its replica had it): a donor that lost its out has
// the units back while the receiver added them (units twice), a receiver that lost its in has
// lost them while the donor deleted the record (units gone). Each step bumps its shard's seq and
// the other shard records the value it saw (xseq:<donor> in the receiver's meta, rseq:<receiver>
// in the donor's), so such a shard's seq is below what another shard recorded of it. The
// records are read before the seqs (a seq only grows, so a step between the two reads cannot
// show as a loss), and only a sale every shard of which holds one epoch, not lost, is judged
// (a load under way is not a loss here; the other detectors cover it). The caller marks the
// sale lost: the rebuild from Postgres restores the exact stock.
func (s *Stock) TransferSeqLoss(ctx context.Context, saleID int64, k int) (SeqLoss, bool, error) {
	if k <= 1 {
		return SeqLoss{}, false, nil
	}
	metas, err := s.hashesOf(ctx, saleID, k, MetaKeyOf)
	if err != nil {
		return SeqLoss{}, false, fmt.Errorf("transfer seqs(sale %d): %w", saleID, err)
	}
	now := make([]*redis.SliceCmd, k)
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range k {
			now[sh] = p.HMGet(ctx, MetaKeyOf(saleID, sh), "seq", "epoch", "lost")
		}
		return nil
	}); err != nil {
		return SeqLoss{}, false, fmt.Errorf("transfer seqs(sale %d): %w", saleID, err)
	}
	seqs := make([]int64, k)
	epoch := ""
	for sh := range k {
		v := now[sh].Val()
		e, _ := v[1].(string)
		lost, _ := v[2].(string)
		if e == "" || lost == "1" || (sh > 0 && e != epoch) || metas[sh]["epoch"] != e {
			return SeqLoss{}, false, nil // not held healthy at one epoch: a load or a loss under way
		}
		epoch = e
		seq, _ := v[0].(string)
		seqs[sh], _ = strconv.ParseInt(seq, 10, 64)
	}
	for sh := range k {
		for f, v := range metas[sh] {
			var of string
			switch {
			case strings.HasPrefix(f, "xseq:"):
				of = f[len("xseq:"):]
			case strings.HasPrefix(f, "rseq:"):
				of = f[len("rseq:"):]
			default:
				continue
			}
			j, err := strconv.Atoi(of)
			rec, err2 := strconv.ParseInt(v, 10, 64)
			if err != nil || err2 != nil || j < 0 || j >= k {
				continue
			}
			if seqs[j] < rec {
				return SeqLoss{Shard: j, Seq: seqs[j], SeenBy: sh, Recorded: rec}, true, nil
			}
		}
	}
	return SeqLoss{}, false, nil
}
