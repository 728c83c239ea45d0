package views

import (
	"context"
	"strings"
)

// The meta description of each page, in each language: what a search engine shows under the
// page's title. A page without one of its own (none should be) gets the home page's. The sale
// page's names the sale (its title); the others are the same for every visitor.
// TestPageDescriptions keeps the two languages in step with the page keys.
var pageDescriptions = map[Lang]map[string]string{
	English: {
		pageHome:        "Live and upcoming flash sales: a few units at a set price, sold from the start second to the first shoppers, one per shopper.",
		pageSale:        "%s: the items, their prices and the countdown to the start. Sign in, and buy at the start second while stock lasts.",
		pageOrder:       "One of your flash-sale orders: its status, its payment deadline, and paying for it or cancelling it.",
		pageMyOrders:    "Your flash-sale orders: what you bought, their status and the payments still due.",
		pageAdmin:       "The merchant's sales: create a flash sale, and follow, pause, resume or end the ones you run.",
		pageAdminLive:   "The merchant's live view of a sale: its stock, its shoppers' funnel and its orders, second by second.",
		pageAdminOrders: "The merchant's list of a sale's orders, with a CSV export.",
		pageNotFound:    "This page does not exist on the flash-sale shop: back to the live and upcoming sales.",
		pageSimPay:      "The simulated payment provider's page of an order: the amount, and paying it without any money moving.",
	},
	Chinese: {
		pageHome:        "正在进行和即将开始的限时抢购：少量商品，固定价格，开抢第一秒起先到先得，每人限购一件。",
		pageSale:        "%s：商品、价格和开抢倒计时。登录后，在开抢那一秒下单，售完即止。",
		pageOrder:       "你的一笔限时抢购订单：状态、付款截止时间，可在此付款或取消。",
		pageMyOrders:    "你的限时抢购订单：买了什么、订单状态以及待付款的订单。",
		pageAdmin:       "商家的抢购活动：创建限时抢购，查看、暂停、恢复或结束你的活动。",
		pageAdminLive:   "商家的活动实时视图：每秒更新库存、顾客漏斗和订单。",
		pageAdminOrders: "商家的活动订单列表，可导出 CSV。",
		pageNotFound:    "限时抢购商店里没有这个页面：返回正在进行和即将开始的活动。",
		pageSimPay:      "订单的模拟支付页面：金额，以及不产生真实扣款的付款。",
	},
}

// pageDescription is the meta description of page in the context's language; title (the page's
// title) fills the %s of a page that names its subject.
func pageDescription(ctx context.Context, page, title string) string {
	d := pageDescriptions[LocaleOf(ctx).Lang]
	s, ok := d[page]
	if !ok {
		s = d[pageHome]
	}
	return strings.Replace(s, "%s", title, 1)
}
