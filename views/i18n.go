package views

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/a-h/templ"
)

// The shopper pages (home, sale, order, my orders, not found) and the merchant's pages (/admin, a
// sale's live view and orders; their words in i18n_admin.go) are written in English or in
// Simplified Chinese. The handler picks the language (handlers/lang.go: ?lang=, else
// Accept-Language) and puts a Locale in the request's context; the components read it from
// there, so a component's signature does not change with the language. A page rendered without
// a Locale (a test's) is in English and shows no language switch.
//
// The words the script writes are in static/js/i18n.js, which reads the page's <html lang>.

// Lang is a language the shopper pages are written in.
type Lang string

const (
	English Lang = "en"
	Chinese Lang = "zh" // Simplified Chinese
)

// Langs are the languages of the switch, in its order.
var Langs = []Lang{Chinese, English}

// ParseLang reads a ?lang= or fs_lang value: "zh" or "en" (any case); ok is false otherwise.
func ParseLang(s string) (Lang, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "zh":
		return Chinese, true
	case "en":
		return English, true
	}
	return "", false
}

// Tag is the BCP 47 tag of the language, for <html lang> and hreflang.
func (l Lang) Tag() string {
	if l == Chinese {
		return "zh-CN"
	}
	return "en"
}

// Name is the language's name in itself, as the switch shows it.
func (l Lang) Name() string {
	if l == Chinese {
		return "中文"
	}
	return "English"
}

// Locale is the language of a page and how it was asked for.
type Locale struct {
	Lang Lang
	// Pinned: the URL named the language (?lang=), so the page's own links keep it; a page
	// chosen by Accept-Language links without it, and the next page is chosen the same way.
	Pinned bool
	// Path and Query are the page's path and its other query parameters (lang taken out): the
	// switch links to the same page in the other language.
	Path  string
	Query url.Values
}

type localeKey struct{}

// WithLocale returns ctx carrying the locale the components render in.
func WithLocale(ctx context.Context, l Locale) context.Context {
	return context.WithValue(ctx, localeKey{}, l)
}

// LocaleOf returns the locale in ctx; without one, English and no switch.
func LocaleOf(ctx context.Context) Locale {
	l, _ := ctx.Value(localeKey{}).(Locale)
	if l.Lang != Chinese {
		l.Lang = English
	}
	return l
}

func hasLocale(ctx context.Context) bool {
	_, ok := ctx.Value(localeKey{}).(Locale)
	return ok
}

// msg returns the words of the context's language.
func msg(ctx context.Context) *Messages {
	return MessagesOf(LocaleOf(ctx).Lang)
}

// MessagesOf returns the words of a language (English for any other).
func MessagesOf(l Lang) *Messages {
	if l == Chinese {
		return &zhMessages
	}
	return &enMessages
}

// langHref is an internal link that keeps a pinned language: "/orders" on a page chosen by
// Accept-Language, "/orders?lang=zh" on a ?lang=zh page. path is already escaped.
func langHref(ctx context.Context, path string) templ.SafeURL {
	l := LocaleOf(ctx)
	if !l.Pinned {
		return templ.URL(path)
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return templ.URL(path + sep + "lang=" + string(l.Lang))
}

// switchHref is the link of the language switch to this page in lang: the page's path and
// other query parameters, with lang=.
func switchHref(ctx context.Context, lang Lang) templ.SafeURL {
	l := LocaleOf(ctx)
	q := url.Values{}
	for k, v := range l.Query {
		if k != "lang" {
			q[k] = v
		}
	}
	q.Set("lang", string(lang))
	path := l.Path
	if path == "" || !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") {
		path = "/"
	}
	return templ.URL((&url.URL{Path: path}).EscapedPath() + "?" + q.Encode())
}

// Messages are the words of the server-rendered shopper pages in one language. Every field is
// set in both languages (TestMessagesComplete).
type Messages struct {
	SiteName string

	// layout
	SkipLink, NavLabel, NavSales, NavOrders, NavAdmin, NavLogin, Footer, LangLabel, Offline string
	// sessionArea
	Username, Password, RegisterHint, CaptchaAlt, CaptchaAnswer, NewPicture string
	LogIn, Register, SignedInAs, LogOut                                     string
	// loggedOutNote: NotSignedIn, the link (LogIn), then what ends the sentence
	NotSignedIn, ToSeeOrder, ToSeeOrders string
	// orderPanel and the sale page's order box
	YourOrder, Item, Price, Sale, Status, Checking, CheckingCap, PayNow, CancelOrder string
	VerifyDraw                                                                       string
	CancelQuestion, CancelYes, CancelNo, OrderLabel, OrderDetails                    string
	// home
	HomeTitle, NoSales, AllEnded, SeeCurrentSales, AllEndedAfter    string
	MoreSalesLabel, FirstSales, MoreSales, ItemsLabel, Starts, Ends string
	StatusUpcoming, StatusLive, StatusEnded                         string
	MoreItems                                                       func(n int) string
	// the ended sales, folded behind a link of the home page
	EndedTitle, NoEndedSales, SeeEndedSales string
	// sale
	Syncing, NeedsJSSale, CaptchaHint, NewChallenge, Buy, YourOrdersInSale string
	UnitsInSale                                                            func(n int) string
	// a sale with a fair start: its first seconds are a draw (seconds: "3", "2.5")
	FairStartNote func(seconds string) string
	// the sale page to a merchant: no Buy, a link to the sale's live view
	MerchantNote, MerchantLiveLink, MerchantNoteAfter string
	// the sale page before the start: "Remind me", its state, and the calendar entry
	RemindMe, ReminderSet, RemindUndo, AddToCalendar, RemindLabel string
	// order
	OrderTitle, OrderHeading, NeedsJSOrder, AllMyOrders, BackToSales string
	// my orders
	MyOrdersTitle, NeedsJSOrders, LoadingOrders, NoOrders, NoOrdersAfter, LoadMore, ViewOrder string
	// not found
	NotFoundTitle, NotFoundHeading, NotFoundDefault, NothingAtAddress string
	// the simulated payment provider's page
	SimPayTitle, SimPayHeading, SimPayNotice, SimPayAmount, SimPayButton, SimPayBack, SimPayToOrder, SimPayClosed, SimPayDone string
}

var enMessages = Messages{
	SiteName: "flashsale",

	SkipLink:  "Skip to content",
	NavLabel:  "Main",
	NavSales:  "Sales",
	NavOrders: "My orders",
	NavLogin:  "Log in or register",
	NavAdmin:  "Merchant admin",
	Footer:    "Times are shown in your time zone once the page has loaded; the countdown follows the shop’s clock.",
	LangLabel: "Language",
	Offline:   "You are offline: nothing reaches the shop until the connection is back, and what this page shows may be out of date meanwhile.",

	Username:      "Username",
	Password:      "Password",
	RegisterHint:  "To register, type what the picture shows.",
	CaptchaAlt:    "Captcha challenge: type the characters you see",
	CaptchaAnswer: "Captcha answer",
	NewPicture:    "New picture",
	LogIn:         "Log in",
	Register:      "Register",
	SignedInAs:    "Signed in as ",
	LogOut:        "Log out",

	NotSignedIn: "You are not signed in. ",
	ToSeeOrder:  " to see this order.",
	ToSeeOrders: " to see your orders.",

	YourOrder:      "Your order",
	Item:           "Item",
	Price:          "Price",
	Sale:           "Sale",
	Status:         "Status",
	Checking:       "checking…",
	CheckingCap:    "Checking…",
	PayNow:         "Pay now",
	CancelOrder:    "Cancel order",
	VerifyDraw:     "Verify the draw",
	CancelQuestion: "Cancel this order? Its unit goes back on sale for other shoppers, and this cannot be undone.",
	CancelYes:      "Yes, cancel the order",
	CancelNo:       "No, keep it",
	OrderLabel:     "Order",
	OrderDetails:   "Order details",

	HomeTitle:       "Flash sales",
	NoSales:         "No sales are live or coming up right now. Check back soon.",
	AllEnded:        "The sales on this page have ended. ",
	SeeCurrentSales: "See the current sales",
	AllEndedAfter:   ".",
	MoreSalesLabel:  "More sales",
	FirstSales:      "First sales",
	MoreSales:       "More sales",
	ItemsLabel:      "Items",
	Starts:          "Starts ",
	Ends:            "Ends ",
	StatusUpcoming:  "Upcoming",
	StatusLive:      "Live now",
	StatusEnded:     "Ended",
	MoreItems: func(n int) string {
		if n == 1 {
			return "and 1 more item"
		}
		return "and " + strconv.Itoa(n) + " more items"
	},

	EndedTitle:    "Ended sales",
	NoEndedSales:  "No sale has ended yet.",
	SeeEndedSales: "See the sales that have ended",

	MerchantNote:      "You are signed in as a merchant: merchants do not buy. ",
	MerchantLiveLink:  "Watch this sale’s live view",
	MerchantNoteAfter: ".",
	RemindMe:          "Remind me",
	ReminderSet:       "Reminder set",
	RemindUndo:        "Undo",
	AddToCalendar:     "Add to calendar (.ics)",
	RemindLabel:       "Reminder of the start",

	Syncing:          "Syncing with the shop’s clock…",
	NeedsJSSale:      "This page needs JavaScript to count down and to buy.",
	CaptchaHint:      "Solve this now, before the sale starts; then press Buy the moment it opens.",
	NewChallenge:     "New challenge",
	Buy:              "Buy",
	YourOrdersInSale: "Your orders in this sale",
	UnitsInSale: func(n int) string {
		if n == 1 {
			return "1 unit in this sale"
		}
		return strconv.Itoa(n) + " units in this sale"
	},
	FairStartNote: func(seconds string) string {
		unit := " seconds"
		if seconds == "1" {
			unit = " second"
		}
		return "Fair start: the first " + seconds + unit + " after the start are a draw. Every purchase in them has the same chance, whatever the speed of your connection; the units go to those drawn, then it is first come, first served."
	},

	OrderTitle:   "Order",
	OrderHeading: "Order status",
	NeedsJSOrder: "This page needs JavaScript to show the order.",
	AllMyOrders:  "All my orders",
	BackToSales:  "Back to the sales",

	MyOrdersTitle: "My orders",
	NeedsJSOrders: "This page needs JavaScript to load your orders.",
	LoadingOrders: "Loading your orders…",
	NoOrders:      "You have no orders yet. ",
	NoOrdersAfter: ".",
	LoadMore:      "Load more",
	ViewOrder:     "View order",

	NotFoundTitle:    "Not found",
	NotFoundHeading:  "Nothing here",
	NotFoundDefault:  "The page you asked for does not exist, or the sale is over.",
	NothingAtAddress: "There is nothing at this address.",

	SimPayTitle:   "Simulated payment",
	SimPayNotice:  "This page stands in for a payment provider's: no money moves. With Stripe set up, the shopper pays on Stripe's page instead.",
	SimPayHeading: "Payment",
	SimPayToOrder: "Back to the order",
	SimPayAmount:  "Amount",
	SimPayButton:  "Pay",
	SimPayBack:    "Cancel and return to the order",
	SimPayClosed:  "This checkout is closed: the order's payment window ended, so it can no longer be paid here.",
	SimPayDone:    "This checkout is paid.",
}

var zhMessages = Messages{
	SiteName: "flashsale",

	SkipLink:  "跳到正文",
	NavLabel:  "主导航",
	NavSales:  "秒杀活动",
	NavOrders: "我的订单",
	NavLogin:  "登录或注册",
	NavAdmin:  "商家后台",
	Footer:    "页面加载后，时间按你所在的时区显示；倒计时以商城的时钟为准。",
	LangLabel: "语言",
	Offline:   "网络已断开：恢复连接前，任何操作都无法送达商城，页面上显示的内容也可能已过时。",

	Username:      "用户名",
	Password:      "密码",
	RegisterHint:  "注册前，请输入图中的字符。",
	CaptchaAlt:    "验证码图片：请输入你看到的字符",
	CaptchaAnswer: "验证码",
	NewPicture:    "换一张",
	LogIn:         "登录",
	Register:      "注册",
	SignedInAs:    "已登录：",
	LogOut:        "退出登录",

	NotSignedIn: "你还没有登录。",
	ToSeeOrder:  "后即可查看此订单。",
	ToSeeOrders: "后即可查看你的订单。",

	YourOrder:      "你的订单",
	Item:           "商品",
	Price:          "价格",
	Sale:           "活动",
	Status:         "状态",
	Checking:       "查询中…",
	CheckingCap:    "查询中…",
	PayNow:         "立即支付",
	CancelOrder:    "取消订单",
	VerifyDraw:     "核验抽签",
	CancelQuestion: "确定要取消这个订单吗？商品会重新开放给其他顾客抢购，取消后无法恢复。",
	CancelYes:      "确定取消",
	CancelNo:       "保留订单",
	OrderLabel:     "订单号",
	OrderDetails:   "订单详情",

	HomeTitle:       "限时秒杀",
	NoSales:         "目前没有正在进行或即将开始的秒杀活动，请稍后再来看看。",
	AllEnded:        "本页的秒杀活动都已结束。",
	SeeCurrentSales: "查看当前的秒杀活动",
	AllEndedAfter:   "。",
	MoreSalesLabel:  "更多活动",
	FirstSales:      "回到第一页",
	MoreSales:       "更多活动",
	ItemsLabel:      "商品",
	Starts:          "开始：",
	Ends:            "结束：",
	StatusUpcoming:  "即将开始",
	StatusLive:      "正在秒杀",
	StatusEnded:     "已结束",
	MoreItems: func(n int) string {
		return "还有 " + strconv.Itoa(n) + " 件商品"
	},

	EndedTitle:    "已结束的秒杀",
	NoEndedSales:  "还没有已结束的秒杀活动。",
	SeeEndedSales: "查看已结束的秒杀活动",

	MerchantNote:      "你当前以商家身份登录：商家不能购买。",
	MerchantLiveLink:  "查看本场秒杀的实时数据",
	MerchantNoteAfter: "。",
	RemindMe:          "开抢提醒我",
	ReminderSet:       "已设置提醒",
	RemindUndo:        "撤销",
	AddToCalendar:     "添加到日历",
	RemindLabel:       "开抢提醒",

	Syncing:          "正在与商城时钟同步…",
	NeedsJSSale:      "此页面需要启用 JavaScript 才能倒计时和购买。",
	CaptchaHint:      "请在秒杀开始前输入验证码，开始后立即点击“立即抢购”。",
	NewChallenge:     "换一张",
	Buy:              "立即抢购",
	YourOrdersInSale: "你在本场的订单",
	UnitsInSale: func(n int) string {
		return "本场共 " + strconv.Itoa(n) + " 件"
	},
	FairStartNote: func(seconds string) string {
		return "公平开抢：开始后的最初 " + seconds + " 秒为抽签。这段时间内的每次购买中签机会相同，与网速快慢无关；商品归中签者，之后先到先得。"
	},

	OrderTitle:   "订单",
	OrderHeading: "订单状态",
	NeedsJSOrder: "此页面需要启用 JavaScript 才能显示订单。",
	AllMyOrders:  "我的全部订单",
	BackToSales:  "返回秒杀活动",

	MyOrdersTitle: "我的订单",
	NeedsJSOrders: "此页面需要启用 JavaScript 才能加载你的订单。",
	LoadingOrders: "正在加载你的订单…",
	NoOrders:      "你还没有订单。",
	NoOrdersAfter: "。",
	LoadMore:      "加载更多",
	ViewOrder:     "查看订单",

	NotFoundTitle:    "页面不存在",
	NotFoundHeading:  "这里什么也没有",
	NotFoundDefault:  "你要找的页面不存在，或者活动已经结束。",
	NothingAtAddress: "这个地址上什么也没有。",

	SimPayTitle:   "模拟支付",
	SimPayNotice:  "此页面代替支付服务商的页面：不会真的扣款。配置 Stripe 后，顾客改在 Stripe 的页面上付款。",
	SimPayHeading: "付款",
	SimPayToOrder: "返回订单",
	SimPayAmount:  "金额",
	SimPayButton:  "支付",
	SimPayBack:    "取消并返回订单",
	SimPayClosed:  "此收银台已关闭：订单的付款期限已过，不能再在这里付款。",
	SimPayDone:    "此收银台已付款。",
}
