package catalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// fakeDB holds one sale in memory; EditSale runs the edit and the Redis step as the real one
// does, keeping the sale as it was when either refuses.
type fakeDB struct {
	DB    // the methods these tests do not reach
	sale  shop.Sale
	money []store.ItemMoney // what SaleMoney answers for the sale
}

func (f *fakeDB) SaleByID(_ context.Context, id int64) (shop.Sale, error) {
	if id != f.sale.ID {
		return shop.Sale{}, store.ErrNotFound
	}
	return f.sale, nil
}

func (f *fakeDB) HighestIDs(context.Context) (sale, item int64, err error) {
	return f.sale.ID, f.sale.Items[len(f.sale.Items)-1].ID, nil
}

func (f *fakeDB) SaleMoney(_ context.Context, saleID int64) ([]store.ItemMoney, error) {
	if saleID != f.sale.ID {
		return nil, nil
	}
	return f.money, nil
}

func (f *fakeDB) SaleMoneyIssues(context.Context, int64) (store.MoneyIssues, error) {
	return store.MoneyIssues{}, nil
}

func (f *fakeDB) EditSale(_ context.Context, saleID int64, edit func(cur shop.Sale) (shop.Sale, error), before func(old, next shop.Sale) error) (shop.Sale, error) {
	if saleID != f.sale.ID {
		return shop.Sale{}, store.ErrNotFound
	}
	cur := f.sale
	cur.Items = append([]shop.Item(nil), f.sale.Items...)
	next, err := edit(cur)
	if err != nil {
		return shop.Sale{}, err
	}
	if err := before(f.sale, next); err != nil {
		return shop.Sale{}, err
	}
	f.sale = next
	return next, nil
}

// fakeStock records the edits sent to Redis and answers them as told.
type fakeStock struct {
	Stock
	adjusted []store.Adjustment
	answer   error
	left     int64
}

func (f *fakeStock) Adjust(_ context.Context, a store.Adjustment) (store.AdjustResult, error) {
	f.adjusted = append(f.adjusted, a)
	if f.answer != nil {
		return store.AdjustResult{ItemID: a.Stock[0].ItemID, Left: f.left}, f.answer
	}
	return store.AdjustResult{Applied: true}, nil
}

func (f *fakeStock) Funnel(context.Context, int64, int64) (store.FunnelCounts, []store.SeriesPoint, error) {
	return store.FunnelCounts{}, nil, nil
}

func (f *fakeStock) RememberShards(int64, int) {}

func (f *fakeStock) Reminders(context.Context, int64) (int64, error) { return 0, nil }

// fakeReconciler answers the sale's report: every item of the sale, nothing on its way.
type fakeReconciler struct{ db *fakeDB }

func (f fakeReconciler) Report(_ context.Context, saleID int64) (pipeline.SaleReport, error) {
	rep := pipeline.SaleReport{SaleID: saleID}
	for _, it := range f.db.sale.Items {
		rep.Items = append(rep.Items, pipeline.ItemReport{ItemID: it.ID, Name: it.Name, Quantity: int64(it.Quantity), Sold: int64(it.Sold), Paid: int64(it.Sold), RedisStock: -1})
	}
	return rep, nil
}

// fakeLoader records the items whose sold-out flag an edit cleared.
type fakeLoader struct {
	Loader
	returned []int64
}

func (f *fakeLoader) Returned(itemID int64) { f.returned = append(f.returned, itemID) }

func fakeSales(t *testing.T, now time.Time) (*Sales, *fakeDB, *fakeStock, *fakeLoader) {
	t.Helper()
	db, stock, loader := &fakeDB{sale: editSale(now.Add(-time.Minute))}, &fakeStock{}, &fakeLoader{}
	db.sale.MerchantID, db.sale.Epoch = 3, 1
	s, err := NewSales(Config{PayWindow: 10 * time.Minute}, Deps{DB: db, Stock: stock, Loader: loader, Queue: pipeline.NoQueue{}, Reconcile: fakeReconciler{db},
		Log: quietLog(), Now: fixedNow(now)})
	if err != nil {
		t.Fatal(err)
	}
	return s, db, stock, loader
}

// A merchant's edit of a live sale, through the catalog with fakes of what it uses: the units
// added reach Redis in the same step, the item's sold-out flag is cleared, and the sale is
// answered as stored.
func TestEditRaisesStockThroughRedis(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	s, db, stock, loader := fakeSales(t, now)
	got, err := s.Edit(t.Context(), 3, db.sale.ID, SaleEdit{Items: []ItemEdit{{ItemID: 71, Quantity: ptr[int64](9)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Items[1].Quantity != 9 || db.sale.Items[1].Quantity != 9 {
		t.Fatalf("answered %+v, stored %+v: want quantity 9", got.Items[1], db.sale.Items[1])
	}
	if len(stock.adjusted) != 1 || len(stock.adjusted[0].Stock) != 1 || stock.adjusted[0].Stock[0].Delta != 4 {
		t.Fatalf("sent to redis %+v, want item 71 +4", stock.adjusted)
	}
	if len(loader.returned) != 1 || loader.returned[0] != 71 {
		t.Fatalf("sold-out flags cleared %v, want [71]", loader.returned)
	}
}

// Another merchant's sale does not exist for them, and nothing reaches Redis.
func TestEditOfAnotherMerchantsSale(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	s, db, stock, _ := fakeSales(t, now)
	_, err := s.Edit(t.Context(), 4, db.sale.ID, SaleEdit{Name: ptr("Mine now")})
	var e *shop.Error
	if !errors.As(err, &e) || e.Code != shop.CodeNotFound || len(stock.adjusted) != 0 || db.sale.Name != "Spring" {
		t.Fatalf("edit = %v; sent %v; name %q: want NOT_FOUND and nothing changed", err, stock.adjusted, db.sale.Name)
	}
}

// Redis refuses a cut below the units it holds free: QUANTITY_TOO_LOW, and the sale stays.
func TestEditCutRefusedByRedis(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	s, db, stock, _ := fakeSales(t, now)
	stock.answer, stock.left = store.ErrAdjustTooLow, 2
	_, err := s.Edit(t.Context(), 3, db.sale.ID, SaleEdit{Items: []ItemEdit{{ItemID: 70, Quantity: ptr[int64](5)}}})
	var e *shop.Error
	if !errors.As(err, &e) || e.Code != shop.CodeQuantityTooLow || db.sale.Items[0].Quantity != 10 {
		t.Fatalf("edit = %v, stored quantity %d: want QUANTITY_TOO_LOW and 10 kept", err, db.sale.Items[0].Quantity)
	}
}
