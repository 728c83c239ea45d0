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
	"time"

	"github.com/redis/go-redis/v9"
)

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
