package views

import (
	"context"

	"github.com/flashsale/flashsale/shop"
)

// The merchant's pages (/admin, a sale's live view and its orders) are written in English and in
// Simplified Chinese like the shopper pages: the handler puts a Locale in the context and the
// components read their words here. Every field is set in both languages
// (TestAdminMessagesComplete). The words their script writes are in static/js/i18n.js.

// AdminMessages are the words of the server-rendered merchant pages in one language.
type AdminMessages struct {
	// /admin
	Title, CreateHeading, Name, Description, ZoneHint, StartsAt, StartLocked, EndsAt  string
	Currency, PayWindow, PurchaseLimit, LimitPerSale, LimitPerItem, Items             string
	AddItemLocked, AddItem, CreateSale, StopEditing, YourSales, NoSalesYet, LiveStock string
	JumpToSales, ShowMoreSales                                                        string
	Close, StockHint                                                                  string
	PayWindowHint                                                                     func(max string) string
	// the fair start (a draw of the first seconds) of the form
	FairStart, FairStartLocked string
	FairStartHint              func(max string) string
	// the columns of the stock tables
	ColItem, ColPrice, ColQuantity, ColDisplayed, ColFrozen, ColReal, ColPaid, ColReconciled string
	ColExpired, ColSoldOut                                                                   string
	// an item row of the form
	ItemLegend, ItemName, ImageURL, Remove, RemoveItem1 string
	// the controls of a sale
	StockLoaded, Checking, ControlsLabel, WarmUp, Pause, Resume, EndEarly, EndConfirmLabel string
	EndQuestion, EndYes, EndNo                                                             string
	// the links between a sale's pages
	ThisSale, BackToSales, Orders, LiveView, Edit, ShopperPage string
	// the live view
	LiveTitle, SaleN                                                  func(id string) string
	AtAGlance, StockPerItem, StockPerItemHint, RequestsPerSecond      string
	ChartLabel, FunnelHeading, Reconciliation, TechnicalDetails       string
	ReservationsTaken, ReservationsRecorded, StockLoadedForSale       string
	TilePaid, TilePaidNote, TileFrozen, TileFrozenNote                string
	TileDisplayed, TileDisplayedNote, TileAccepted, TileAcceptedNote  string
	TileRefused, TileRefusedNote, TileBooks, TileBooksNote            string
	TileLag, TileLagNote, TileQueue, TileQueueNote                    string
	RemindersHint                                                     string
	FunnelRequests, FunnelRefused, FunnelAccepted, FunnelWritten      string
	FunnelPaid, FunnelExpired, FunnelCancelled                        string
	ReasonSoldOut, ReasonDuplicate, ReasonRateLimited, ReasonBadToken string
	ReasonCaptcha, ReasonPaused, ReasonOther                          string
	// the live view's draw (a fair start)
	DrawHeading, DrawHint, DrawWindow, DrawEntries, DrawWinners, DrawClosed, DrawRecord string
	ColPlace, ColRank, ColEnteredAt, ColOutcome, DrawNoEntries, DrawPages               string
	DrawCommitment, DrawSeed, DrawUndecided                                             string
	// the live view's money
	MoneyHeading, MoneyPaid, MoneyAwaiting, MoneyRefunded, MoneyBefore string
	MoneyRefundNote, ColPaidAmount                                     string
	// the fire drill of the live view
	DrillHeading, DrillIntro, DrillShoppers, DrillSeconds, DrillCrowd, DrillCrowdHint string
	DrillStart, DrillLimits, DrillSellOut, DrillRefusals, DrillAccepted, DrillLatency string
	DrillWriterLag                                                                    string
	// the orders page
	OrdersTitle                                                              func(id string) string
	OrdersHeading, SaleLower                                                 string
	StatusLabel, AllStatuses, Shopper, ShopperHint, Show, Clear              string
	DownloadCSV, CSVHint, ColOrder, ColShopper, ColStatus                    string
	ColOrdered, ColPayBy, ColPaidAt, NoOrdersMatch, PagesOfOrders, FirstPage string
	NextPage, StatusPending, StatusPaid, StatusExpired, StatusCancl          string
	StatusFailed, ColPayment                                                 string
	StatusEntered, StatusNotDrawn                                            string // a fair start's draw: an entry waiting, one not drawn
	// the currencies' units, by code
	Units map[string]string
}

// am returns the merchant's words in the context's language.
func am(ctx context.Context) *AdminMessages {
	if LocaleOf(ctx).Lang == Chinese {
		return &zhAdmin
	}
	return &enAdmin
}

// currencyLabelIn is a currency as the form's choice names it: "CNY (¥, yuan)", "CNY（¥，元）".
func currencyLabelIn(ctx context.Context, c shop.Currency) string {
	m := am(ctx)
	unit := m.Units[c.Code]
	if unit == "" {
		unit = c.Unit
	}
	if LocaleOf(ctx).Lang == Chinese {
		return c.Code + "（" + c.Symbol + "，" + unit + "）"
	}
	return c.Code + " (" + c.Symbol + ", " + unit + ")"
}

var enAdmin = AdminMessages{
	Title:         "Merchant admin",
	CreateHeading: "Create a sale",
	Name:          "Name",
	Description:   "Description (optional)",
	ZoneHint:      "Times are in your time zone.",
	StartsAt:      "Starts at",
	StartLocked:   "The sale has started: its start can no longer move.",
	EndsAt:        "Ends at",
	Currency:      "Currency",
	PayWindow:     "Payment window (minutes)",
	PurchaseLimit: "Purchase limit",
	LimitPerSale:  "One unit per shopper in the whole sale",
	LimitPerItem:  "One unit per shopper of each item",
	Items:         "Items",
	AddItemLocked: "The sale has started: items can no longer be added.",
	AddItem:       "Add item",
	CreateSale:    "Create sale",
	StopEditing:   "Stop editing",
	YourSales:     "Your sales",
	NoSalesYet:    "You have no sales yet.",
	JumpToSales:   "Your sales ↓",
	ShowMoreSales: "Show more sales",
	LiveStock:     "Live stock: ",
	Close:         "Close",
	StockHint:     "Refreshed every second. Displayed is what shoppers see; frozen is reserved and not yet paid; real is quantity − paid.",
	PayWindowHint: func(max string) string {
		return "A winner has this long to pay before the unit goes back on sale (1 to " + max + ")."
	},
	FairStart:       "Fair start (seconds)",
	FairStartLocked: "The sale has started: its fair start can no longer change.",
	FairStartHint: func(max string) string {
		return "Purchases in the first seconds given here are drawn at random instead of first come, first served (0: off; at most " + max + ")."
	},

	ColItem: "Item", ColPrice: "Price", ColQuantity: "Quantity", ColDisplayed: "Displayed", ColFrozen: "Frozen",
	ColReal: "Real", ColPaid: "Paid", ColReconciled: "Reconciled", ColExpired: "Expired", ColSoldOut: "Sold out",

	ItemLegend: "Item ", ItemName: "Item name", ImageURL: "Image URL (optional)", Remove: "Remove", RemoveItem1: "Remove item 1",

	StockLoaded:     "Stock loaded for the sale:",
	Checking:        "checking…",
	ControlsLabel:   "Sale controls",
	WarmUp:          "Warm up now",
	Pause:           "Pause",
	Resume:          "Resume",
	EndEarly:        "End early",
	EndConfirmLabel: "Confirm ending the sale",
	EndQuestion:     "End this sale now? Shoppers can no longer buy; the orders already taken stay. This cannot be undone.",
	EndYes:          "Yes, end it now",
	EndNo:           "No, keep it",

	ThisSale: "This sale", BackToSales: "← Your sales", Orders: "Orders", LiveView: "Live view", Edit: "Edit",
	ShopperPage: "Shopper's page",

	LiveTitle:            func(id string) string { return "Live view · sale " + id },
	SaleN:                func(id string) string { return "Sale " + id },
	AtAGlance:            "At a glance",
	StockPerItem:         "Stock per item",
	StockPerItemHint:     "Displayed is what shoppers see; frozen is reserved and not paid (on its way, queued or awaiting payment); real is quantity − paid.",
	RequestsPerSecond:    "Requests per second",
	ChartLabel:           "Accepted and refused requests per second over the sale",
	FunnelHeading:        "Funnel since the start",
	Reconciliation:       "Reconciliation",
	TechnicalDetails:     "Technical details",
	ReservationsTaken:    "Reservations taken (counter)",
	ReservationsRecorded: "Reservations recorded (counter)",
	StockLoadedForSale:   "Stock loaded for the sale",

	TilePaid: "Paid", TilePaidNote: "units bought and paid",
	TileFrozen: "Frozen", TileFrozenNote: "reserved, not paid yet",
	TileDisplayed: "Displayed", TileDisplayedNote: "what shoppers see left",
	TileAccepted: "Accepted", TileAcceptedNote: "purchases that won a unit",
	TileRefused: "Refused", TileRefusedNote: "requests turned away",
	TileBooks: "Books", TileBooksNote: "sold units against recorded orders",
	TileLag: "Order recording delay", TileLagNote: "oldest order not yet recorded",
	TileQueue: "Orders waiting", TileQueueNote: "orders waiting to be recorded",
	DrillHeading:  "Fire drill",
	DrillIntro:    "Rehearse the rush before the sale: synthetic shoppers buy from a hidden copy of this sale (same items and quantities) through the real purchase path of this instance. Your live stock, orders and shoppers are never touched, and the copy is removed afterwards.",
	DrillShoppers: "Shoppers", DrillSeconds: "Over (seconds)", DrillCrowd: "Expected crowd in the first second",
	DrillCrowdHint: "automatic",
	DrillStart:     "Run the fire drill",
	DrillLimits:    "At most 50,000 shoppers over at most 30 seconds. Left empty, the expected crowd is the sale's reminders ×10, or its units ×20. No drill while any sale is live or starts within 30 minutes (a running drill stops if one comes near): it shares the machines. After a drill, the next waits 10 minutes.",
	DrillSellOut:   "Sold out after", DrillRefusals: "Shoppers refused", DrillAccepted: "Orders accepted per second",
	DrillLatency: "Answer time (median / 99%)", DrillWriterLag: "Orders recorded after",
	RemindersHint: "Shoppers who pressed Remind me on the sale page before the start: an estimate of the crowd. Each shopper counts once; a reminder undone stays counted.",

	FunnelRequests: "Requests", FunnelRefused: "Refused", FunnelAccepted: "Accepted", FunnelWritten: "Orders recorded",
	FunnelPaid: "Paid", FunnelExpired: "Expired unpaid", FunnelCancelled: "Cancelled",
	ReasonSoldOut: "sold out", ReasonDuplicate: "already bought (duplicate)", ReasonRateLimited: "rate limited",
	ReasonBadToken: "bad purchase token", ReasonCaptcha: "captcha failed", ReasonPaused: "sale paused", ReasonOther: "other",

	DrawHeading:    "Fair start: the draw",
	DrawHint:       "Purchases in the sale's first seconds enter a draw instead of taking units in the order they arrive. The shop publishes a commitment to a secret seed before the window opens and reveals the seed once the draw is decided; each entry's rank follows from the seed and its order id, so anyone can recompute the draw (flashsale verify-draw, or the shopper's own order page). The record lists every entry, best first, per item.",
	DrawWindow:     "Window",
	DrawEntries:    "Entries",
	DrawWinners:    "Drawn",
	DrawClosed:     "Closed",
	DrawRecord:     "The record",
	ColPlace:       "Place",
	ColRank:        "Rank",
	ColEnteredAt:   "Entered at",
	ColOutcome:     "Outcome",
	DrawNoEntries:  "No entries yet.",
	DrawPages:      "Pages of the draw's record",
	DrawCommitment: "Commitment (SHA-256 of the seed, published before the window):",
	DrawSeed:       "Seed (revealed once decided):",
	DrawUndecided:  "The record appears once the draw is decided: until then nobody, you included, sees who entered or their rank, and the quantities cannot change. Pausing stays possible; each pause is counted here.",
	MoneyHeading:   "Money", MoneyPaid: "Paid", MoneyAwaiting: "Sent, awaiting the provider's confirmation", MoneyRefunded: "Refunded",
	MoneyBefore:     "Nothing sold yet: from the start, the money paid, awaiting confirmation and refunded shows here.",
	MoneyRefundNote: "Refunds are payments that arrived after their order had expired or been cancelled: each goes back to the shopper in full, by itself.",
	ColPaidAmount:   "Paid amount",

	OrdersTitle:   func(id string) string { return "Orders · sale " + id },
	OrdersHeading: "Orders: ",
	SaleLower:     "sale ",
	StatusLabel:   "Status",
	AllStatuses:   "All",
	Shopper:       "Shopper (username or #id)",
	ShopperHint:   "A username, or # and the user id of a shopper without an account here.",
	Show:          "Show",
	Clear:         "Clear",
	DownloadCSV:   "Download CSV",
	CSVHint:       "every order of the sale, whatever the filter",
	ColOrder:      "Order", ColShopper: "Shopper", ColStatus: "Status", ColOrdered: "Ordered", ColPayBy: "Pay by", ColPaidAt: "Paid",
	NoOrdersMatch: "No orders match.",
	PagesOfOrders: "Pages of orders",
	FirstPage:     "First page",
	NextPage:      "Next page",
	StatusPending: "Awaiting payment", StatusPaid: "Paid", StatusExpired: "Expired", StatusCancl: "Cancelled", StatusFailed: "Failed",
	StatusEntered: "In the draw", StatusNotDrawn: "Not drawn",
	ColPayment: "Payment",

	Units: map[string]string{"CNY": "yuan", "USD": "dollar", "EUR": "euro"},
}

var zhAdmin = AdminMessages{
	Title:         "商家后台",
	CreateHeading: "创建秒杀活动",
	Name:          "活动名称",
	Description:   "活动描述（选填）",
	ZoneHint:      "时间按你所在的时区填写。",
	StartsAt:      "开始时间",
	StartLocked:   "活动已开始，开始时间不能再修改。",
	EndsAt:        "结束时间",
	Currency:      "币种",
	PayWindow:     "支付时限（分钟）",
	PurchaseLimit: "限购规则",
	LimitPerSale:  "整场活动每位顾客限购一件",
	LimitPerItem:  "每件商品每位顾客限购一件",
	Items:         "商品",
	AddItemLocked: "活动已开始，不能再添加商品。",
	AddItem:       "添加商品",
	CreateSale:    "创建活动",
	StopEditing:   "取消编辑",
	YourSales:     "我的秒杀活动",
	NoSalesYet:    "你还没有秒杀活动。",
	JumpToSales:   "我的秒杀活动 ↓",
	ShowMoreSales: "显示更多活动",
	LiveStock:     "实时库存：",
	Close:         "关闭",
	StockHint:     "每秒刷新。“显示库存”是顾客看到的剩余数量；“冻结”是已锁定但尚未支付的数量；“实际库存”是总量减去已支付。",
	PayWindowHint: func(max string) string {
		return "抢到的顾客须在此时间内支付，否则商品重新开放抢购（1 到 " + max + " 分钟）。"
	},
	FairStart:       "公平开抢（秒）",
	FairStartLocked: "活动已开始，公平开抢不能再修改。",
	FairStartHint: func(max string) string {
		return "开始后这几秒内的购买随机抽签决定，而不是先到先得（0 为关闭，最多 " + max + " 秒）。"
	},

	ColItem: "商品", ColPrice: "价格", ColQuantity: "总量", ColDisplayed: "显示库存", ColFrozen: "冻结",
	ColReal: "实际库存", ColPaid: "已支付", ColReconciled: "对账", ColExpired: "已过期", ColSoldOut: "售罄",

	ItemLegend: "商品 ", ItemName: "商品名称", ImageURL: "图片链接（选填）", Remove: "删除", RemoveItem1: "删除商品 1",

	StockLoaded:     "活动库存载入：",
	Checking:        "查询中…",
	ControlsLabel:   "活动操作",
	WarmUp:          "立即预热",
	Pause:           "暂停",
	Resume:          "恢复",
	EndEarly:        "提前结束",
	EndConfirmLabel: "确认结束活动",
	EndQuestion:     "现在就结束这场活动吗？顾客将无法再购买，已有的订单保留。此操作无法撤销。",
	EndYes:          "确定，立即结束",
	EndNo:           "不，继续活动",

	ThisSale: "本场活动", BackToSales: "← 我的秒杀活动", Orders: "订单", LiveView: "实时看板", Edit: "编辑",
	ShopperPage: "顾客页面",

	LiveTitle:            func(id string) string { return "实时看板 · 活动 " + id },
	SaleN:                func(id string) string { return "活动 " + id },
	AtAGlance:            "概览",
	StockPerItem:         "各商品库存",
	StockPerItemHint:     "“显示库存”是顾客看到的剩余数量；“冻结”是已锁定但尚未支付的数量（处理中、排队中或待支付）；“实际库存”是总量减去已支付。",
	RequestsPerSecond:    "每秒请求数",
	ChartLabel:           "活动期间每秒抢到与被拒绝的请求数",
	FunnelHeading:        "开始以来的转化漏斗",
	Reconciliation:       "对账",
	TechnicalDetails:     "技术细节",
	ReservationsTaken:    "已锁定的购买（计数器）",
	ReservationsRecorded: "已记录的购买（计数器）",
	StockLoadedForSale:   "活动库存载入",

	TilePaid: "已支付", TilePaidNote: "已购买并支付的件数",
	TileFrozen: "冻结", TileFrozenNote: "已锁定，尚未支付",
	TileDisplayed: "显示库存", TileDisplayedNote: "顾客看到的剩余数量",
	TileAccepted: "抢到", TileAcceptedNote: "抢到商品的购买请求",
	TileRefused: "被拒绝", TileRefusedNote: "被拒绝的请求",
	TileBooks: "账目", TileBooksNote: "售出件数与已记录订单的核对",
	TileLag: "订单记录延迟", TileLagNote: "最早一笔尚未记录的订单",
	TileQueue: "待记录订单", TileQueueNote: "等待记录的订单",
	DrillHeading:  "消防演练",
	DrillIntro:    "在活动前演练开抢：模拟顾客通过本实例真实的购买流程，抢购本场活动的一个隐藏副本（商品和数量相同）。你的真实库存、订单和顾客不受任何影响，演练结束后副本会被删除。",
	DrillShoppers: "顾客数", DrillSeconds: "持续（秒）", DrillCrowd: "预计第一秒的人数",
	DrillCrowdHint: "自动",
	DrillStart:     "开始消防演练",
	DrillLimits:    "最多 50,000 位顾客，最长 30 秒。预计人数留空时，取本场活动的提醒人数 ×10，或商品件数 ×20。有活动正在进行或 30 分钟内开始时不能演练（演练进行中有活动临近也会停止）：演练与活动共用机器。一次演练结束后，下一次需等待 10 分钟。",
	DrillSellOut:   "售罄用时", DrillRefusals: "被拒绝的顾客", DrillAccepted: "每秒接受的订单",
	DrillLatency: "响应时间（中位数 / 99%）", DrillWriterLag: "订单记录完成于",
	RemindersHint: "开抢前在活动页点了“开抢提醒我”的顾客：用来预估人流。每位顾客只计一次；撤销的提醒仍计入。",

	FunnelRequests: "请求", FunnelRefused: "被拒绝", FunnelAccepted: "抢到", FunnelWritten: "已记录的订单",
	FunnelPaid: "已支付", FunnelExpired: "超时未支付", FunnelCancelled: "已取消",
	ReasonSoldOut: "已售罄", ReasonDuplicate: "重复购买", ReasonRateLimited: "请求过于频繁",
	ReasonBadToken: "购买凭证无效", ReasonCaptcha: "验证码错误", ReasonPaused: "活动已暂停", ReasonOther: "其他",

	DrawHeading:    "公平开抢：抽签",
	DrawHint:       "活动开始后最初几秒内的购买参加抽签，而不是按到达顺序拿到商品。商店在抽签窗口开始前公布一个秘密种子的承诺值，开奖后公开种子；每个参与者的名次由种子和其订单号算出，任何人都可以重新计算整个抽签（用商店程序的核验命令，或在顾客自己的订单页面上）。下面的记录按商品列出每个参与者，名次从好到差。",
	DrawWindow:     "抽签时长",
	DrawEntries:    "参与人数",
	DrawWinners:    "中签",
	DrawClosed:     "结束时间",
	DrawRecord:     "抽签记录",
	ColPlace:       "名次",
	ColRank:        "名次",
	ColEnteredAt:   "参与时间",
	ColOutcome:     "结果",
	DrawNoEntries:  "还没有人参与。",
	DrawPages:      "抽签记录的分页",
	DrawCommitment: "承诺值（种子的 SHA-256，抽签开始前公布）：",
	DrawSeed:       "种子（开奖后公开）：",
	DrawUndecided:  "开奖后才显示抽签记录：在此之前任何人（包括您）都看不到谁参加了以及名次，数量也不能修改。仍然可以暂停活动，每次暂停都会记录在这里。",
	MoneyHeading:   "金额", MoneyPaid: "已收款", MoneyAwaiting: "已付款，待支付方确认", MoneyRefunded: "已退款",
	MoneyBefore:     "尚未售出任何商品：活动开始后，这里显示已收款、等待确认和已退款的金额。",
	MoneyRefundNote: "退款是订单过期或取消之后才到账的付款：每一笔都会自动全额退还给顾客。",
	ColPaidAmount:   "已收金额",

	OrdersTitle:   func(id string) string { return "订单 · 活动 " + id },
	OrdersHeading: "订单：",
	SaleLower:     "活动 ",
	StatusLabel:   "状态",
	AllStatuses:   "全部",
	Shopper:       "顾客（用户名或 #编号）",
	ShopperHint:   "填写用户名；本店没有账号的顾客，填写 # 加用户编号。",
	Show:          "查询",
	Clear:         "清除",
	DownloadCSV:   "下载 CSV 表格",
	CSVHint:       "包含本场活动的全部订单，不受筛选影响",
	ColOrder:      "订单号", ColShopper: "顾客", ColStatus: "状态", ColOrdered: "下单时间", ColPayBy: "支付截止", ColPaidAt: "支付时间",
	NoOrdersMatch: "没有符合条件的订单。",
	PagesOfOrders: "订单分页",
	FirstPage:     "第一页",
	NextPage:      "下一页",
	StatusPending: "待支付", StatusPaid: "已支付", StatusExpired: "已过期", StatusCancl: "已取消", StatusFailed: "失败",
	StatusEntered: "抽签中", StatusNotDrawn: "未中签",
	ColPayment: "支付",

	Units: map[string]string{"CNY": "元", "USD": "美元", "EUR": "欧元"},
}
