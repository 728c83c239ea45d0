package shop

import "time"

// Sale is a flash sale: a window of time in which its items sell, one unit per shopper (per sale
// or per item), each unit paid within the payment window. The services decide on it, the store
// keeps it, the pages show it; nobody outside the store sees a database row.
type Sale struct {
	ID                   int64
	MerchantID           int64
	Name                 string
	StartsAt             time.Time
	EndsAt               time.Time
	CreatedAt            time.Time
	PaymentWindowSeconds int
	PurchaseLimit        string      // "per-sale" or "per-item"
	Currency             string      // ISO 4217; prices are in its minor units
	Description          string      // "" when none
	Paused               bool        // the merchant paused it: purchases answer 503 PAUSED
	StockShards          int         // the Redis shards its stock is split into (1: not split)
	FairStartMillis      int         // the draw window after the start (0: first come, first served from the start)
	DrawClosedAt         *time.Time  // when its draw was decided (nil: not yet, or no draw)
	DrawSeed             []byte      // the draw's secret seed (DrawSeedSize bytes): never shown before DrawClosedAt (RevealedSeed)
	DrawPauses           int         // pauses while the draw was undecided (an emergency stop, shown in the draw's record)
	Limits               *RateLimits // its own purchase-path rate limits; nil: DefaultRateLimits
	Epoch                int64       // how often Redis was (re)built from Postgres for it; 0: never loaded
	// DrillOf is, for a fire drill's scratch copy, the sale it copies (services/drill): a copy is
	// listed nowhere and sells only to the drill's own shoppers. 0: a real sale.
	DrillOf int64
	Items   []Item
}

// OwnedBy tells whether merchantID may see and change the sale: it is theirs and not a fire
// drill's scratch copy (a copy is the drill's alone: to its merchant too it does not exist).
func (s Sale) OwnedBy(merchantID int64) bool { return s.MerchantID == merchantID && s.DrillOf == 0 }

// RateLimits are the sale's purchase-path rate limits, its own where set.
func (s Sale) RateLimits() RateLimits {
	if s.Limits != nil {
		return *s.Limits
	}
	return DefaultRateLimits
}

// Item is one product of a Sale.
type Item struct {
	ID         int64
	SaleID     int64
	Position   int // its place in the sale, from 0
	Name       string
	PriceCents int64
	Quantity   int
	Sold       int    // units in live orders (PENDING or PAID)
	ImageURL   string // "" when none
	MaxSeq     int64  // the highest reservation number of it in Postgres
}

// Sale statuses as shoppers see them.
const (
	SaleUpcoming = "upcoming"
	SaleLive     = "live"
	SaleEnded    = "ended"
)

// SaleStatus tells whether a sale is upcoming, live or ended at now.
func SaleStatus(startsAt, endsAt, now time.Time) string {
	switch {
	case now.Before(startsAt):
		return SaleUpcoming
	case now.Before(endsAt):
		return SaleLive
	}
	return SaleEnded
}

// Limits on what a merchant may create: the validation (services/catalog) and the create form's
// fields (views) both read them here.
const (
	MaxItemsPerSale         = 50
	MaxQuantity             = 1_000_000
	MaxPriceCents           = 100_000_000_00
	MaxNameRunes            = 200 // a sale's or an item's name
	MaxDescriptionRunes     = 2000
	MaxImageURLBytes        = 2000
	MaxPaymentWindowSeconds = 86400 // a day
	MaxSaleLength           = 30 * 24 * time.Hour
)

// Currency is one currency a sale may be priced in (ISO 4217); prices are integers in its minor
// unit (cents, fen).
type Currency struct {
	Code   string // ISO 4217
	Symbol string // as the pages write an amount: "¥19.99"
	Unit   string // the unit's name in the create form: "yuan"
	Digits int    // digits of the minor unit
}

// Currencies are the currencies a sale may be priced in, the first the default: the one table the
// validation, the forms and the pages read.
var Currencies = []Currency{
	{Code: "CNY", Symbol: "¥", Unit: "yuan", Digits: 2},
	{Code: "USD", Symbol: "$", Unit: "dollar", Digits: 2},
	{Code: "EUR", Symbol: "€", Unit: "euro", Digits: 2},
}

// IsCurrency reports whether a sale may be priced in code.
func IsCurrency(code string) bool {
	for _, c := range Currencies {
		if c.Code == code {
			return true
		}
	}
	return false
}

// CurrencyList names the currencies for a message: "CNY, USD or EUR".
func CurrencyList() string {
	s := ""
	for i, c := range Currencies {
		switch {
		case i == 0:
		case i == len(Currencies)-1:
			s += " or "
		default:
			s += ", "
		}
		s += c.Code
	}
	return s
}

// Purchase limits: one unit per shopper in the whole sale, or per item.
const (
	LimitPerSale = "per-sale"
	LimitPerItem = "per-item"
)

// MaxStockShards is the most shards a sale's stock can be split into.
const MaxStockShards = 64

// RateLimits are requests per second allowed on a sale's purchase path (captcha, purchase token,
// purchase), per shopper and per client IP, each its own bucket with a burst of twice the rate.
type RateLimits struct {
	UserPerSecond int
	IPPerSecond   int
}

// DefaultRateLimits suit a human clicking: a few attempts a second per shopper, and room for an
// office or campus behind one address.
var DefaultRateLimits = RateLimits{UserPerSecond: 5, IPPerSecond: 100}

// ItemInfo is what the purchase path needs to know of an item, cached in process.
type ItemInfo struct {
	ItemID   int64
	SaleID   int64
	StartsAt time.Time
	EndsAt   time.Time
	Limits   RateLimits
	Limit    string // purchase limit
	Found    bool   // false: no such item (remembered like a found one, for less time)
	// FairStartMillis: the sale's draw window after its start (0: none)
	FairStartMillis int
}

// User is an account: a shopper or a merchant (Role), with its bcrypt password hash.
type User struct {
	ID           int64
	Username     string
	PasswordHash string
	Role         string
	CreatedAt    time.Time
}
