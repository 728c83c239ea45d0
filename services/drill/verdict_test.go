package drill

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
)

func ptr[T any](v T) *T { return &v }

func TestSettingsDefaultsAndLimits(t *testing.T) {
	got, err := Settings{}.resolve()
	if err != nil || got.shoppers != DefaultShoppers || got.seconds != DefaultSeconds || got.crowd != 0 {
		t.Fatalf("defaults: %+v %v, want %d shoppers over %d s, the sale's crowd", got, err, DefaultShoppers, DefaultSeconds)
	}
	for _, bad := range []Settings{
		{Shoppers: ptr(0)}, {Shoppers: ptr(MaxShoppers + 1)}, {Seconds: ptr(0)}, {Seconds: ptr(MaxSeconds + 1)},
		{ExpectedCrowd: ptr[int64](0)}, {ExpectedCrowd: ptr[int64](-5)},
	} {
		if _, err := bad.resolve(); shop.ErrorCode(err) != shop.CodeInvalidInput {
			t.Errorf("%+v: %v, want INVALID_INPUT", bad, err)
		}
	}
	if got, err := (Settings{Shoppers: ptr(MaxShoppers), Seconds: ptr(MaxSeconds), ExpectedCrowd: ptr[int64](7)}).resolve(); err != nil || got.crowd != 7 {
		t.Errorf("the limits themselves: %+v %v", got, err)
	}
}

func TestExpectedCrowd(t *testing.T) {
	sale := shop.Sale{Items: []shop.Item{{Quantity: 30}, {Quantity: 20}}}
	for _, c := range []struct {
		given, reminders int64
		want             int64
		source           string
	}{
		{given: 123, reminders: 9, want: 123, source: CrowdGiven},
		{reminders: 9, want: 90, source: CrowdReminders},
		{want: 1000, source: CrowdQuantity},
	} {
		if got, src := expectedCrowd(c.given, c.reminders, sale); got != c.want || src != c.source {
			t.Errorf("expectedCrowd(%d, %d) = %d %s, want %d %s", c.given, c.reminders, got, src, c.want, c.source)
		}
	}
}

func TestJudge(t *testing.T) {
	r := judge(Measure{Shoppers: 2000, Seconds: 2, Units: 500, Accepted: 500, Refused: 1400, Errors: 100,
		LastAccept: 500 * time.Millisecond, P50: time.Millisecond, P99: 30 * time.Millisecond, ServedFast: 1800,
		WriterLag: 12 * time.Millisecond, WriterDrained: true, ExpectedCrowd: 10000, CrowdSource: CrowdQuantity})
	if !r.SoldOut || r.SellOutSeconds == nil || *r.SellOutSeconds != 0.5 || r.AcceptedPerSecond != 1000 || r.RefusalRate != 0.7 {
		t.Errorf("sold out %v after %v at %v/s, refusals %v", r.SoldOut, r.SellOutSeconds, r.AcceptedPerSecond, r.RefusalRate)
	}
	if r.CapacityPerSecond != 900 || r.InstancesNeeded != 12 || r.CapacityIsFloor {
		t.Errorf("N %d M %d floor %v, want 900, ceil(10000/900) = 12, not a floor (errors)", r.CapacityPerSecond, r.InstancesNeeded, r.CapacityIsFloor)
	}
	if want := "This instance can take about 900 shoppers per second; your expected crowd of 10000 needs 12 instances."; r.Verdict != want {
		t.Errorf("verdict %q, want %q", r.Verdict, want)
	}
	// not sold out, everyone served fast: N is a floor, one instance
	r = judge(Measure{Shoppers: 100, Seconds: 1, Units: 500, Accepted: 100, LastAccept: time.Second, ServedFast: 100, ExpectedCrowd: 50})
	if r.SoldOut || r.SellOutSeconds != nil || r.InstancesNeeded != 1 || !r.CapacityIsFloor ||
		r.Verdict != "This instance answered every shopper of the drill within a second, 100 per second, as many as the drill sent: it did not reach its limit. Your expected crowd of 50 needs at most 1 instance; a larger drill tells more." {
		t.Errorf("%+v", r)
	}
	// nobody served within a second
	r = judge(Measure{Shoppers: 100, Seconds: 1, Errors: 100, LastAccept: -1, ExpectedCrowd: 50})
	if r.CapacityPerSecond != 0 || r.InstancesNeeded != 0 || !strings.Contains(r.Verdict, "no shopper within a second") {
		t.Errorf("%+v", r)
	}
}

type fakeCaptcha struct{}

func (fakeCaptcha) New(context.Context, int64, int64) (string, string, error) {
	return "id", "img", nil
}
func (fakeCaptcha) Verify(_ context.Context, _, _ int64, _, answer string) (bool, error) {
	return answer == "test", nil
}

func TestCaptchaKeepsTheCopyToTheDrill(t *testing.T) {
	d := New(Config{}, Deps{})
	r := &running{id: 1, secret: "s3cret"}
	r.copyID.Store(77)
	d.cur.Store(r)
	c := Captcha{Inner: fakeCaptcha{}, Drills: d, IsCopy: func(_ context.Context, id int64) bool { return id == 77 || id == 78 }}
	ctx := context.Background()
	for _, tc := range []struct {
		user, sale int64
		id, answer string
		want       bool
	}{
		{ShopperBase + 5, 77, ChallengeID, "s3cret", true}, // the drill's shopper, the drill's answer
		{ShopperBase + 5, 77, ChallengeID, "test", false},  // a wrong answer
		{5, 77, ChallengeID, "s3cret", false},              // a real shopper on the copy
		{5, 78, "x", "test", false},                        // another copy (another instance's, or left behind)
		{ShopperBase + 5, 12, "x", "test", false},          // the drill's shopper on a real sale
		{5, 12, "x", "test", true},                         // the rest is the inner captcha's
	} {
		if got, _ := c.Verify(ctx, tc.user, tc.sale, tc.id, tc.answer); got != tc.want {
			t.Errorf("Verify(user %d, sale %d, %q): %v, want %v", tc.user, tc.sale, tc.answer, got, tc.want)
		}
	}
}
