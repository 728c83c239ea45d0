package drill

import (
	"fmt"
	"math"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// The limits and defaults of a drill (docs/api.md, web/openapi.yaml).
const (
	DefaultShoppers = 20000
	MaxShoppers     = 50000
	DefaultSeconds  = 10
	MaxSeconds      = 30
	// NotNowWindow: no drill while a real sale is live or starts within this (the drill shares
	// the machines with it).
	NotNowWindow = 30 * time.Minute
	// DefaultCooldown: after a merchant's drill ends (done, failed or stopped), that merchant's
	// next drill waits this long (Config.Cooldown): a drill loads the machines every sale shares,
	// and a merchant gains little from running them back to back.
	DefaultCooldown = 10 * time.Minute
	// FastAnswer is the answer time a shopper is counted "served" within, for the capacity.
	FastAnswer = time.Second
	// crowd defaults: reminders ×10, or else the units on sale ×20.
	crowdPerReminder = 10
	crowdPerUnit     = 20
	maxCrowd         = 100_000_000
)

// Where the expected crowd came from.
const (
	CrowdGiven     = "given"     // the merchant's own figure
	CrowdReminders = "reminders" // the sale's "Remind me" count ×10
	CrowdQuantity  = "quantity"  // the sale's units ×20 (no reminders yet)
)

// Settings are a drill's request; a nil field takes its default.
type Settings struct {
	Shoppers      *int
	Seconds       *int
	ExpectedCrowd *int64
}

// settings are Settings checked, the defaults filled in (crowd 0: the sale's default,
// expectedCrowd).
type settings struct {
	shoppers, seconds int
	crowd             int64
}

// resolve checks the settings and fills the defaults in.
func (in Settings) resolve() (settings, error) {
	out := settings{shoppers: DefaultShoppers, seconds: DefaultSeconds}
	if in.Shoppers != nil {
		out.shoppers = *in.Shoppers
	}
	if in.Seconds != nil {
		out.seconds = *in.Seconds
	}
	if in.ExpectedCrowd != nil {
		out.crowd = *in.ExpectedCrowd
		if out.crowd < 1 || out.crowd > maxCrowd {
			return out, shop.Errorf(shop.CodeInvalidInput, "expectedCrowd must be between 1 and %d, or left out for the sale's default", maxCrowd)
		}
	}
	if out.shoppers < 1 || out.shoppers > MaxShoppers {
		return out, shop.Errorf(shop.CodeInvalidInput, "shoppers must be between 1 and %d", MaxShoppers)
	}
	if out.seconds < 1 || out.seconds > MaxSeconds {
		return out, shop.Errorf(shop.CodeInvalidInput, "seconds must be between 1 and %d", MaxSeconds)
	}
	return out, nil
}

// expectedCrowd is the crowd the verdict sizes for: the merchant's figure, or else the sale's
// reminders ×10, or else its units ×20 (at least 1).
func expectedCrowd(given, reminders int64, sale shop.Sale) (int64, string) {
	if given > 0 {
		return given, CrowdGiven
	}
	if reminders > 0 {
		return min(reminders*crowdPerReminder, maxCrowd), CrowdReminders
	}
	var units int64
	for _, it := range sale.Items {
		units += int64(it.Quantity)
	}
	return min(max(units*crowdPerUnit, 1), maxCrowd), CrowdQuantity
}

// Measure is what a drill's run saw: the generator's counts and times, and the writer's lag.
type Measure struct {
	Shoppers      int           // arrivals sent
	Seconds       int           // over this many seconds
	Units         int64         // units on sale in the copy
	Accepted      int64         // purchases answered 202
	Refused       int64         // shoppers turned away with an answer (sold out, already bought, rate limited…)
	Errors        int64         // shoppers answered 5xx, or not at all in time
	LastAccept    time.Duration // since the start, of the last 202; <0: none
	P50, P99      time.Duration // a shopper's whole visit, from its scheduled time
	ServedFast    int64         // shoppers answered (not an error) within FastAnswer
	WriterLag     time.Duration // the last 202 → every accepted order in Postgres
	WriterDrained bool          // false: the writer had not written them all when the drill stopped waiting
	ExpectedCrowd int64
	CrowdSource   string
}

// Result is a drill's outcome as the API and the page show it.
type Result struct {
	Shoppers          int      `json:"shoppers"`
	Seconds           int      `json:"seconds"`
	Units             int64    `json:"units"`
	Accepted          int64    `json:"accepted"`
	Refused           int64    `json:"refused"`
	Errors            int64    `json:"errors"`
	SoldOut           bool     `json:"soldOut"`
	SellOutSeconds    *float64 `json:"sellOutSeconds"` // null: not sold out
	RefusalRate       float64  `json:"refusalRate"`    // refused / shoppers, 0..1
	AcceptedPerSecond float64  `json:"acceptedPerSecond"`
	P50Millis         float64  `json:"p50Millis"`
	P99Millis         float64  `json:"p99Millis"`
	WriterLagMillis   float64  `json:"writerLagMillis"`
	WriterDrained     bool     `json:"writerDrained"`
	CapacityPerSecond int64    `json:"capacityPerSecond"` // N
	CapacityIsFloor   bool     `json:"capacityIsFloor"`   // every shopper served fast: the instance may take more than N
	ExpectedCrowd     int64    `json:"expectedCrowd"`     // K, shoppers in the first second
	CrowdSource       string   `json:"crowdSource"`
	InstancesNeeded   int64    `json:"instancesNeeded"` // M; 0: the instance served no one fast enough to say
	Verdict           string   `json:"verdict"`
}

func millis(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

// judge turns what a drill saw into its result and the verdict in plain words. The capacity N
// is the shoppers answered within a second (without an error) per second of the drill; the crowd
// K is the shoppers expected in the sale's first second; M = ceil(K / N) instances.
func judge(m Measure) Result {
	r := Result{Shoppers: m.Shoppers, Seconds: m.Seconds, Units: m.Units, Accepted: m.Accepted, Refused: m.Refused, Errors: m.Errors,
		P50Millis: millis(m.P50), P99Millis: millis(m.P99), WriterLagMillis: millis(m.WriterLag), WriterDrained: m.WriterDrained,
		ExpectedCrowd: m.ExpectedCrowd, CrowdSource: m.CrowdSource}
	if m.Shoppers > 0 {
		r.RefusalRate = math.Round(float64(m.Refused)/float64(m.Shoppers)*10000) / 10000
	}
	if m.Units > 0 && m.Accepted >= m.Units && m.LastAccept >= 0 {
		r.SoldOut = true
		s := math.Round(m.LastAccept.Seconds()*1000) / 1000
		r.SellOutSeconds = &s
	}
	if m.Accepted > 0 && m.LastAccept > 0 {
		r.AcceptedPerSecond = math.Round(float64(m.Accepted)/m.LastAccept.Seconds()*10) / 10
	}
	if m.Seconds > 0 {
		r.CapacityPerSecond = m.ServedFast / int64(m.Seconds)
	}
	r.CapacityIsFloor = m.Shoppers > 0 && m.ServedFast >= int64(m.Shoppers) && m.Errors == 0
	if r.CapacityPerSecond > 0 {
		r.InstancesNeeded = max(1, (m.ExpectedCrowd+r.CapacityPerSecond-1)/r.CapacityPerSecond)
	}
	r.Verdict = verdict(r)
	return r
}

// verdict is the result in one plain sentence (English; the page words it in the reader's
// language from the same numbers).
func verdict(r Result) string {
	if r.CapacityPerSecond == 0 {
		return fmt.Sprintf("This instance answered no shopper within a second during the drill; your expected crowd of %d cannot be sized from it: look at the errors and try a smaller drill.", r.ExpectedCrowd)
	}
	instances := "instances"
	if r.InstancesNeeded == 1 {
		instances = "instance"
	}
	if r.CapacityIsFloor {
		// N is only the rate the drill sent: the instance did not show its limit, so M is a
		// bound, not a count.
		return fmt.Sprintf("This instance answered every shopper of the drill within a second, %d per second, as many as the drill sent: it did not reach its limit. Your expected crowd of %d needs at most %d %s; a larger drill tells more.",
			r.CapacityPerSecond, r.ExpectedCrowd, r.InstancesNeeded, instances)
	}
	return fmt.Sprintf("This instance can take about %d shoppers per second; your expected crowd of %d needs %d %s.",
		r.CapacityPerSecond, r.ExpectedCrowd, r.InstancesNeeded, instances)
}
