package tests

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// TestSaleMoney: the merchant sees money, not only units (issue 20, item 5), on real Postgres.
// Per item: what the PAID orders took (as the provider confirmed it, or the direct pay at the
// order's price), the PENDING orders awaiting the provider's confirmation and their price (the
// price each was bought at; an older order without one, the item's), the payments that came after
// their order had expired (refunded; "still being made" until the provider accepted the refund).
// An order without a checkout counts nowhere. The live view, the orders list and the CSV say the
// same.
func TestSaleMoney(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noKeeper: true})
	ctx := context.Background()
	s := h.liveSale(5, 5) // item 0 at 10.00, item 1 at 10.01
	merchant := h.token(9000, auth.RoleMerchant)
	checkout := func(id, bearer string) {
		t.Helper()
		if c := h.do("POST", "/api/flash-sales/orders/"+id+"/checkout", bearer, nil); c.Status != http.StatusOK {
			t.Fatalf("checkout of %s: %d %s", id, c.Status, c.Raw)
		}
	}
	confirm := func(id string, cents int64) {
		t.Helper()
		if err := h.app.Payments.Apply(ctx, h.ownPayment("evt_"+id, id, "pi_"+id, cents)); err != nil {
			t.Fatalf("confirm %s: %v", id, err)
		}
	}

	// Nothing sold yet: zeros for both items, in position order.
	if m, err := h.app.DB.SaleMoney(ctx, s.sale); err != nil || len(m) != 2 || m[0] != (store.ItemMoney{ItemID: s.items[0]}) || m[1] != (store.ItemMoney{ItemID: s.items[1]}) {
		t.Fatalf("money before any order: %+v (%v), want two items of zeros", m, err)
	}

	// item 0: paid through the provider (10.00), awaiting at the price it was bought at (9.00),
	// PENDING without a checkout (nothing).
	paid, bPaid := h.pendingOrder(1, s, s.items[0])
	checkout(paid, bPaid)
	confirm(paid, 1000)
	awaiting, bAwaiting := h.pendingOrder(2, s, s.items[0])
	checkout(awaiting, bAwaiting)
	h.exec(`UPDATE orders SET unit_price_cents = 900 WHERE id = ?`, awaiting)
	unpaid, _ := h.pendingOrder(3, s, s.items[0])
	// item 1: paid directly (its price, 10.01), awaiting with no price of its own (an order older
	// than payments: the item's, 10.01), and a payment that came after its order expired.
	direct, bDirect := h.pendingOrder(4, s, s.items[1])
	if r := h.do("POST", "/api/flash-sales/orders/"+direct+"/pay", bDirect, nil); r.Status != http.StatusOK {
		t.Fatalf("direct pay: %d %s", r.Status, r.Raw)
	}
	older, bOlder := h.pendingOrder(5, s, s.items[1])
	checkout(older, bOlder)
	h.exec(`UPDATE orders SET unit_price_cents = NULL WHERE id = ?`, older)
	late, bLate := h.pendingOrder(6, s, s.items[1])
	checkout(late, bLate)
	h.exec(`UPDATE orders SET pay_by = now() - interval '1 second' WHERE id = ?`, late)
	if err := h.app.KeeperPass(ctx); err != nil {
		t.Logf("keeper pass: %v", err)
	}
	if st := h.sqlStr(`SELECT status FROM orders WHERE id = ?`, late); st != "EXPIRED" {
		t.Fatalf("the late order is %s, want EXPIRED", st)
	}
	confirm(late, 1001) // the payment arrives after the expiry: refunded, the refund not made yet

	want := []store.ItemMoney{
		{ItemID: s.items[0], PaidCents: 1000, Awaiting: 1, AwaitingCents: 900},
		{ItemID: s.items[1], PaidCents: 1001, Awaiting: 1, AwaitingCents: 1001, Refunds: 1, RefundedCents: 1001, RefundsPending: 1},
	}
	if m, err := h.app.DB.SaleMoney(ctx, s.sale); err != nil || fmt.Sprint(m) != fmt.Sprint(want) {
		t.Errorf("money: %+v (%v)\nwant %+v", m, err, want)
	}
	h.checkLiveMoney(merchant, s, `{"currency":"CNY","paidCents":2001,"awaitingPayment":2,"awaitingCents":1901,"refunds":1,"refundedCents":1001,"refundsPending":1}`,
		[2]string{"1000 1 900 0 0", "1001 1 1001 1 1001"})

	// The orders list: each order's payment.
	base := fmt.Sprintf("/api/admin/sales/%d/orders", s.sale)
	payment := func() map[string]string {
		orders, _ := h.adminOrders(merchant, base, "")
		out := map[string]string{}
		for _, o := range orders {
			out[o["orderId"].(string)] = fmt.Sprintf("%v %v %v %v %v", o["paymentStatus"], o["paidCents"], o["refunded"], o["paymentId"], o["refundId"])
		}
		return out
	}
	got := payment()
	for id, w := range map[string]string{
		paid: "paid 1000 false pi_" + paid + " <nil>", awaiting: "awaiting <nil> false <nil> <nil>", unpaid: "none <nil> false <nil> <nil>",
		direct: "paid 1001 false sim_pi_" + direct + " <nil>", older: "awaiting <nil> false <nil> <nil>", late: "refunded 1001 false pi_" + late + " <nil>",
	} {
		if got[id] != w {
			t.Errorf("order %s in the list: %q, want %q", id, got[id], w)
		}
	}

	// The keeper makes the refund: refunded, with the provider's refund id; none still being made.
	h.app.Payments.Pass(ctx)
	if w := "refunded 1001 true pi_" + late + " sim_re_" + late; payment()[late] != w {
		t.Errorf("the refunded order in the list: %q, want %q", payment()[late], w)
	}
	want[1].RefundsPending = 0
	if m, err := h.app.DB.SaleMoney(ctx, s.sale); err != nil || fmt.Sprint(m) != fmt.Sprint(want) {
		t.Errorf("money after the refund: %+v (%v)\nwant %+v", m, err, want)
	}
	h.checkLiveMoney(merchant, s, `{"currency":"CNY","paidCents":2001,"awaitingPayment":2,"awaitingCents":1901,"refunds":1,"refundedCents":1001,"refundsPending":0}`,
		[2]string{"1000 1 900 0 0", "1001 1 1001 1 1001"})

	// The CSV: the payment's columns at the end, after the username.
	req, _ := http.NewRequest("GET", h.srv.URL+base+".csv", nil)
	req.Header.Set("Authorization", "Bearer "+merchant)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := csv.NewReader(bufio.NewReader(resp.Body))
	header, err := rd.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(header[10:], ","); got != "username,paymentStatus,paidCents,paymentId,refundId" {
		t.Errorf("the CSV header ends %q, want username then the payment's columns", got)
	}
	rows, byID := readCSVRows(t, rd)
	for id, w := range map[string]string{
		paid: "paid,1000,pi_" + paid + ",", awaiting: "awaiting,,,", unpaid: "none,,,",
		direct: "paid,1001,sim_pi_" + direct + ",", late: "refunded,1001,pi_" + late + ",sim_re_" + late,
	} {
		if r := byID[id]; r == nil || strings.Join(r[11:], ",") != w {
			t.Errorf("CSV row of %s: %q, want it to end %q", id, r, w)
		}
	}
	if rows != 6 {
		t.Errorf("CSV rows: %d, want 6", rows)
	}
	h.checkInvariants(s)
}

// checkLiveMoney waits until the live view (computed once a second) shows the sale's money as
// want and each item's "paidCents awaitingPayment awaitingCents refunds refundedCents" as items.
func (h *harness) checkLiveMoney(merchant string, s saleIDs, want string, items [2]string) {
	h.t.Helper()
	testenv.Eventually(h.t, 5*time.Second, "the live view's money", func() error {
		r := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/live", s.sale), merchant, nil)
		if r.Status != http.StatusOK {
			return fmt.Errorf("live view: %d %s", r.Status, r.Raw)
		}
		m := r.Body["money"].(map[string]any)
		got := fmt.Sprintf(`{"currency":%q,"paidCents":%v,"awaitingPayment":%v,"awaitingCents":%v,"refunds":%v,"refundedCents":%v,"refundsPending":%v}`,
			m["currency"], m["paidCents"], m["awaitingPayment"], m["awaitingCents"], m["refunds"], m["refundedCents"], m["refundsPending"])
		if got != want {
			return fmt.Errorf("money %s, want %s", got, want)
		}
		for i, it := range r.Body["items"].([]any) {
			o := it.(map[string]any)
			if g := fmt.Sprintf("%v %v %v %v %v", o["paidCents"], o["awaitingPayment"], o["awaitingCents"], o["refunds"], o["refundedCents"]); g != items[i] {
				return fmt.Errorf("item %d's money %q, want %q", i, g, items[i])
			}
		}
		return nil
	})
}
