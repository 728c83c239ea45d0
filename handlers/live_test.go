package handlers

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

type fakeLive struct {
	v   catalog.LiveView
	err error
	got [2]int64 // merchant, sale asked for
}

func (f *fakeLive) Live(_ context.Context, merchantID, saleID int64) (catalog.LiveView, error) {
	f.got = [2]int64{merchantID, saleID}
	return f.v, f.err
}

func serveLive(t *testing.T, f *fakeLive, saleID string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	c.Request = httptest.NewRequest(http.MethodGet, "/api/admin/sales/"+saleID+"/live", nil)
	c.Params = gin.Params{{Key: "saleId", Value: saleID}}
	SetIdentity(c, auth.Identity{UserID: 9, Role: auth.RoleMerchant})
	(&API{Live: f, Log: slog.New(slog.DiscardHandler)}).AdminLive(c)
	return rec
}

// The live view's JSON: ids as strings, null for what is not known (not loaded, a sale-wide
// check, a queue depth NATS did not give), every refusal reason, never cached.
func TestAdminLiveJSON(t *testing.T) {
	t.Parallel()
	loaded := time.Date(2026, 12, 1, 3, 0, 0, 123_000_000, time.UTC)
	f := &fakeLive{v: catalog.LiveView{
		Sale: catalog.LiveSale{ID: 7, Name: "Launch", Status: catalog.LiveRunning, StartsAt: loaded, EndsAt: loaded.Add(time.Hour), LoadedAt: &loaded},
		Items: []catalog.AdminItemStock{
			{ItemID: 11, Name: "a", Quantity: 10, Displayed: 6, Frozen: 3, InFlight: 1, Pending: 2, Paid: 1, Real: 9, LoadedAt: &loaded},
			{ItemID: 12, Name: "b", Quantity: 5, Displayed: -1, Real: 5},
		},
		Money: catalog.LiveSaleMoney{Currency: "EUR", LiveMoney: catalog.LiveMoney{PaidCents: 1500, Awaiting: 2, AwaitingCents: 3000,
			Refunds: 1, RefundedCents: 1500, RefundsPending: 1},
			Items: map[int64]catalog.LiveMoney{11: {PaidCents: 1500, Awaiting: 2, AwaitingCents: 3000, Refunds: 1, RefundedCents: 1500, RefundsPending: 1}}},
		Reconciliation: catalog.LiveReconciliation{State: catalog.ReconcileSettling, AsOf: loaded, Loaded: true, RedisCounter: 4, PostgresMaxSeq: 3,
			Checks: []catalog.LiveCheck{{Name: "buyers", OK: true, Detail: "redis 3 buyers"}, {Name: "conservation", ItemID: 11, Detail: "redis stock 6, want 5"}}},
		Funnel: catalog.LiveFunnel{Requests: 9, Accepted: 4, Refused: map[string]int64{catalog.RefusedSoldOut: 5}, Written: 3, Paid: 1},
		Series: []store.SeriesPoint{{T: 1_800_000_000, Accepted: 4, Refused: 5}},
		Writer: catalog.LiveWriter{LagSeconds: 0.25},
		AsOf:   loaded,
	}}
	rec := serveLive(t, f, "7")
	if rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != "no-store" || f.got != [2]int64{9, 7} {
		t.Fatalf("status %d, Cache-Control %q, asked %v: %s", rec.Code, rec.Header().Get("Cache-Control"), f.got, rec.Body)
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	sale := got["sale"].(map[string]any)
	items := got["items"].([]any)
	rec0, rec1 := items[0].(map[string]any), items[1].(map[string]any)
	checks := got["reconciliation"].(map[string]any)["checks"].([]any)
	writer := got["writer"].(map[string]any)
	if sale["saleId"] != "7" || sale["status"] != "running" || sale["loadedAt"] != "2026-12-01T03:00:00.123Z" || sale["startsAt"] != "2026-12-01T03:00:00Z" {
		t.Errorf("sale %v", sale)
	}
	if rec0["itemId"] != "11" || rec0["frozen"] != float64(3) || rec0["inFlight"] != float64(1) || rec0["loadedAt"] == nil ||
		rec1["loadedAt"] != nil || rec1["displayed"] != float64(-1) {
		t.Errorf("items %v", items)
	}
	if _, ok := rec1["loadedAt"]; !ok {
		t.Errorf("an item not loaded has no loadedAt key (want null): %v", rec1)
	}
	if c0, c1 := checks[0].(map[string]any), checks[1].(map[string]any); c0["itemId"] != nil || c1["itemId"] != "11" || c1["ok"] != false {
		t.Errorf("checks %v", checks)
	}
	if v, ok := writer["queueDepth"]; !ok || v != nil || writer["lagSeconds"] != 0.25 {
		t.Errorf("writer %v; want lagSeconds 0.25 and queueDepth null", writer)
	}
	if s := got["series"].([]any)[0].(map[string]any); s["t"] != float64(1_800_000_000) || s["accepted"] != float64(4) || s["refused"] != float64(5) {
		t.Errorf("series %v", got["series"])
	}
	// The money: the sale's in its currency, each item's (zeros for one without any).
	if m, _ := got["money"].(map[string]any); m["currency"] != "EUR" || m["paidCents"] != float64(1500) || m["awaitingPayment"] != float64(2) ||
		m["awaitingCents"] != float64(3000) || m["refunds"] != float64(1) || m["refundedCents"] != float64(1500) || m["refundsPending"] != float64(1) {
		t.Errorf("money %v", got["money"])
	}
	if rec0["paidCents"] != float64(1500) || rec0["awaitingPayment"] != float64(2) || rec0["awaitingCents"] != float64(3000) ||
		rec0["refunds"] != float64(1) || rec0["refundedCents"] != float64(1500) || rec1["paidCents"] != float64(0) || rec1["refunds"] != float64(0) {
		t.Errorf("the items' money: %v, %v", rec0, rec1)
	}
	if r := got["reconciliation"].(map[string]any); r["state"] != "settling" || r["redisCounter"] != float64(4) {
		t.Errorf("reconciliation %v", r)
	}
}

func TestAdminLiveErrors(t *testing.T) {
	t.Parallel()
	f := &fakeLive{err: shop.Errorf(shop.CodeNotFound, "no sale 7")}
	if rec := serveLive(t, f, "7"); rec.Code != http.StatusNotFound {
		t.Errorf("another merchant's sale: %d %s", rec.Code, rec.Body)
	}
	f = &fakeLive{}
	if rec := serveLive(t, f, "seven"); rec.Code != http.StatusBadRequest || f.got != [2]int64{} {
		t.Errorf("a bad id: %d %s (asked %v)", rec.Code, rec.Body, f.got)
	}
}
