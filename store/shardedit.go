package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

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
