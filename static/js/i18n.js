// The page's language: the words the script writes, in English or Simplified Chinese, and the
// locale of its dates and numbers. The server chose the language and wrote it in <html lang>
// (views/i18n.go, handlers/lang.go); the script follows it. A message's key is its English text,
// with {name} for what is filled in; ZH (and the merchant's pages' words, i18n_zh_admin.js, which
// only those pages load) hold the Chinese of every key the modules use (views/jsi18n_test.go
// checks that none is missing).
//
// The language is remembered in the fs_lang cookie, but the server never varies a page on it (a
// cache would mix the languages): a page that came in another language than the remembered one
// goes to its ?lang= address (initLang), and the links the script writes keep a ?lang= (href).

import { getCookie } from './storage.js';

export const lang = /^zh(-|$)/i.test(document.documentElement.getAttribute('lang') || '') ? 'zh' : 'en';

// locale is the Intl locale of the page's dates and numbers.
export const locale = lang === 'zh' ? 'zh-CN' : 'en';

const ZH = {
  // order_verify.js: a shopper checks a fair start's draw
  'Could not read the draw\u2019s record: {why}': '无法读取抽签记录：{why}',
  'The draw is not decided yet: it can be checked once its seed is revealed.': '抽签尚未开奖：种子公开后才能核验。',
  'The draw is too large to check in a browser: run flashsale verify-draw {sale}.': '抽签记录太大，无法在浏览器中核验：请运行 flashsale verify-draw {sale}。',
  'This browser can check the draw only on a secure (https) page: run flashsale verify-draw {sale} instead.': '浏览器只能在安全（https）页面上核验抽签：请改为运行 flashsale verify-draw {sale}。',
  'The draw\u2019s seed is not 32 bytes: the draw cannot be checked.': '抽签种子不是 32 字节：无法核验。',
  'The revealed seed is not the one committed to before the draw: the draw does not check out.': '公开的种子与抽签前承诺的不一致：抽签核验未通过。',
  'Your entry is not in the draw\u2019s record: the draw does not check out.': '你的参与记录不在抽签记录中：抽签核验未通过。',
  'Entry {id} is not where its draw key places it: the draw does not check out.': '参与记录 {id} 的名次与其抽签值不符：抽签核验未通过。',
  'Checked in your browser: the seed is the one committed to before the draw. Your entry was not ranked (a second entry of the same shopper, or one that reached the shop after the draw).': '已在你的浏览器中核验：种子与抽签前的承诺一致。你的参与记录未参加排名（同一顾客的第二次参与，或在开奖后才到达商城）。',
  'Checked in your browser: the seed is the one committed to before the draw, and from it your entry ranks {place} of {count} for this item, which had {units} unit(s) to draw: {outcome}': '已在你的浏览器中核验：种子与抽签前的承诺一致，据此你的参与记录在该商品的 {count} 个参与者中排第 {place} 名，该商品共有 {units} 件参与抽签：{outcome}',
  'you were drawn.': '你已中签。',
  'you were not drawn.': '你未中签。',
  'Checking the draw\u2026': '正在核验抽签…',
  // time.js
  '{d} d {hms}': '{d}天 {hms}',
  // order.js, order_actions.js, simpay.js: payments
  'Taking you to the payment page…': '正在前往支付页面…',
  'The shop could not be reached to start the payment: nothing was charged. Try again.': '无法连接商城以发起支付：未产生任何扣款。请重试。',
  'Opening the payment page…': '正在打开支付页面…',
  'Your payment arrived after this order had ended (its payment window closed, or it was cancelled) and its unit had gone back on sale, so it has been refunded in full.': '你的付款在订单结束（支付期限已过或已取消）、商品已重新开放抢购之后才到账，因此已全额退款。',
  'Your payment arrived after this order had ended (its payment window closed, or it was cancelled) and its unit had gone back on sale; it is being refunded in full.': '你的付款在订单结束（支付期限已过或已取消）、商品已重新开放抢购之后才到账，正在全额退款。',
  'Payment sent: waiting for the payment provider to confirm it. This page updates by itself.': '付款已提交：正在等待支付服务商确认。本页面会自动更新。',
  'A payment page is open for this order: finish paying there, or press Pay to go back to it.': '此订单的支付页面已打开：请在那里完成付款，或点击“支付”回到该页面。',
  'If your payment went through after the order ended, it is refunded in full: this page says so within a few minutes.': '如果你的付款在订单结束后才完成，将全额退款：本页面会在几分钟内显示。',
  'Payment not made: the order is still yours until its deadline.': '未付款：在截止时间前，此订单仍为你保留。',
  'The payment could not be sent (the network dropped): nothing was charged. Try again.': '付款未能发送（网络中断）：未产生任何扣款。请重试。',
  // status.js
  'Your unit is reserved; the order is being recorded. This takes a moment.': '已为你锁定商品，正在生成订单，请稍候。',
  'Reserved for you. Pay before the deadline or the unit goes back on sale.': '商品已为你保留。请在截止时间前支付，否则商品将重新开放抢购。',
  'Paid. Thank you for your order!': '支付成功，感谢你的购买！',
  'The payment window closed; the unit went back on sale.': '支付时间已过，商品已重新开放抢购。',
  'This order was cancelled; its unit went back on sale.': '订单已取消，商品已重新开放抢购。',
  'The order could not be completed; nothing was charged.': '订单未能完成，未产生任何扣款。',
  'Confirming': '确认中',
  'Awaiting payment': '待支付',
  'Paid': '已支付',
  'A free item: nothing to pay, the order is confirmed.': '免费商品：无需支付，订单已确认。',
  'Expired': '已过期',
  'Cancelled': '已取消',
  'Failed': '失败',
  'You are number {n} in line.': '你排在第 {n} 位。',
  'You are number {n} in line, about {wait}.': '你排在第 {n} 位，预计还需约 {wait}。',
  '1 second': '1 秒',
  '{n} seconds': '{n} 秒',
  '{n} minutes': '{n} 分钟',
  // api.js
  'Network problem: the shop could not be reached. Check your connection and try again.': '网络异常：无法连接商城。请检查网络后重试。',
  'Sold out: every unit has been taken.': '已售罄：所有商品都已被抢光。',
  'You already hold an order in this sale (one per shopper).': '你在本场活动中已有订单（每人限购一件）。',
  'The sale has not started yet.': '秒杀还没有开始。',
  'The sale has ended.': '秒杀已结束。',
  'Too many attempts; try again in {s} s': '操作太频繁，请 {s} 秒后再试。',
  'The captcha answer was wrong or expired; a new one is shown.': '验证码错误或已过期，已为你换了一张新的。',
  'Your purchase pass was refused (used or expired); solve the new captcha and try again.': '购买凭证无效（已使用或已过期），请输入新的验证码后重试。',
  'Please log in first.': '请先登录。',
  'Your session could not be verified; please log in again.': '无法验证你的登录状态，请重新登录。',
  'The shop is busy; nothing was reserved, try again.': '商城繁忙，未锁定任何商品，请重试。',
  'The sale is paused by the merchant; nothing was reserved. Try again when it resumes.': '商家已暂停本场秒杀，未锁定任何商品。请在恢复后重试。',
  'A merchant account cannot buy: log in with a shopper account to buy.': '商家账号不能购买：请用顾客账号登录后购买。',
  'Too late: the payment window closed and the order expired.': '太晚了：支付时间已过，订单已过期。',
  'This order cannot be paid: it is still being confirmed, or it was cancelled.': '此订单无法支付：订单仍在确认中，或已被取消。',
  'This order can no longer be cancelled.': '此订单已无法取消。',
  'The order is still being confirmed; it can be cancelled in a moment, once it awaits payment.': '订单仍在确认中，变为待支付后即可取消。',
  'Wrong username or password.': '用户名或密码错误。',
  'That username is taken; choose another.': '该用户名已被占用，请换一个。',
  'A username has 3 to 32 characters.': '用户名须为 3 到 32 个字符。',
  'A username may hold only letters, digits, _, - and .': '用户名只能包含字母、数字以及 _、-、.',
  'A password has 8 to 72 bytes.': '密码长度须为 8 到 72 个字节。',
  'The input was not accepted; check it and try again.': '输入有误，请检查后重试。',
  'Something went wrong (HTTP {status}).': '出错了（HTTP {status}）。',
  // session.js
  'Type a username and a password.': '请输入用户名和密码。',
  'Type what the picture shows, then press Register.': '请输入图中的字符，然后点击“注册”。',
  'Creating your account…': '正在创建账号…',
  'Logging in…': '正在登录…',
  'The captcha answer was wrong or expired; try the new picture.': '验证码错误或已过期，请输入新图片中的字符。',
  'The shop is busy; try again in a moment.': '商城繁忙，请稍后再试。',
  'Account created. Welcome!': '账号已创建，欢迎！',
  'Welcome back!': '欢迎回来！',
  'The draw is done: your entry below says how it went.': '抽签已完成：结果见下方你的参与记录。',
  'Logged out.': '已退出登录。',
  '{role} #{id}': '{role} #{id}',
  'shopper': '顾客',
  'merchant': '商家',
  'user': '用户',
  // sale_remind.js
  'This page will notify you at the start: keep this tab open.': '开抢时本页会通知你：请保持此标签页打开。',
  'This browser cannot show notifications: add the sale to your calendar instead.': '此浏览器无法显示通知：请改为把活动添加到日历。',
  'Notifications are blocked for this site: add the sale to your calendar instead.': '本网站的通知已被屏蔽：请改为把活动添加到日历。',
  'Reminder removed.': '提醒已取消。',
  'Log in first to set a reminder.': '请先登录，再设置开抢提醒。',
  'A merchant account cannot set a reminder: log in with a shopper account.': '商家账号不能设置开抢提醒：请用顾客账号登录。',
  '{name} has started': '{name} 已开抢',
  'The sale is live: buy now.': '活动已开始，快来抢购。',
  // home.js, sale.js
  'Upcoming': '即将开始',
  'Live now': '正在秒杀',
  'Ended': '已结束',
  'Starts in {d}': '距开始还有 {d}',
  'Ends in {d}': '距结束还有 {d}',
  'Syncing with the shop’s clock…': '正在与商城时钟同步…',
  'Log in and solve the captcha now, so you are ready when the Buy buttons light up.': '现在就登录并输入验证码，“立即抢购”按钮亮起时即可下单。',
  'Solve the captcha now, so you are ready when the Buy buttons light up.': '现在就输入验证码，“立即抢购”按钮亮起时即可下单。',
  'Paused': '已暂停',
  'The merchant paused the sale for a moment: Buy comes back when it resumes.': '商家暂时暂停了本场秒杀，恢复后“立即抢购”按钮会重新亮起。',
  '{name} just sold out; the other items are still on sale.': '“{name}”刚刚售罄，其他商品仍在抢购中。',
  '{name} just sold out: every unit has been taken.': '“{name}”刚刚售罄，所有商品都已被抢光。',
  'This item': '此商品',
  '1 unit in this sale': '本场共 1 件',
  '{n} units in this sale': '本场共 {n} 件',
  'This sale is over.': '本场秒杀已结束。',
  'sold out': '已售罄',
  '{n} left': '剩余 {n} 件',
  'Buy': '立即抢购',
  'Buying…': '抢购中…',
  'Bought': '已购买',
  'Ordered': '已下单',
  'Sold out': '已售罄',
  'You bought this item.': '你已购买此商品。',
  'You ordered this item: pay for it in your orders below.': '你已下单此商品，请在下方的订单中完成支付。',
  'You ordered this item; it is being confirmed.': '你已下单此商品，订单正在确认中。',
  'One per shopper in this sale: you already have {name}.': '本场每人限购一件：你已经抢到了“{name}”。',
  'an item': '商品',
  'your item': '商品',
  'the item': '商品',
  'Your order of {name} is confirmed: pay before the deadline below, or the unit goes back on sale.': '你的“{name}”订单已确认：请在下方的截止时间前支付，否则商品将重新开放抢购。',
  'Your order of {name} expired: the payment window closed and the unit went back on sale.': '你的“{name}”订单已过期：支付时间已过，商品已重新开放抢购。',
  'Your order of {name} was cancelled; its unit went back on sale.': '你的“{name}”订单已取消，商品已重新开放抢购。',
  'Your order of {name} is paid. Thank you!': '你的“{name}”订单已支付，谢谢！',
  'Your order of {name} could not be completed; nothing was charged.': '你的“{name}”订单未能完成，未产生任何扣款。',
  'Solve this now, before the sale starts; then press Buy the moment it opens.': '请在秒杀开始前输入验证码，开始后立即点击“立即抢购”。',
  'Type the characters you see, then press Buy.': '请输入图中的字符，然后点击“立即抢购”。',
  'You are offline: a captcha loads once the connection is back.': '网络已断开：恢复连接后会加载验证码。',
  'Loading a captcha…': '正在加载验证码…',
  'Could not load a captcha: {why} Use “New challenge” to retry.': '验证码加载失败：{why}请点击“换一张”重试。',
  'the answer was not understood.': '无法识别商城的回复。',
  'Type the captcha answer first.': '请先输入验证码。',
  'Answer ready: now press Buy on the item you want.': '验证码已填好：现在点击想要商品的“立即抢购”。',
  'Answer ready: press Buy the moment the sale opens.': '验证码已填好：秒杀一开始就点击“立即抢购”。',
  'There is nothing to buy here right now.': '目前没有可以购买的商品。',
  'You already hold an order in this sale: ': '你在本场活动中已有订单：',
  'view it': '查看订单',
  'You already hold an order in this sale (one per shopper): ': '你在本场活动中已有订单（每人限购一件）：',
  'see your orders': '查看我的订单',
  '.': '。',
  'No answer from the shop yet; asking again about the same purchase…': '商城尚未回复，正在就同一笔购买再次询问…',
  'The shop’s answer was lost (the network dropped), so this page cannot tell whether you bought {name}. Before buying again, check ': '商城的回复丢失了（网络中断），本页无法确定你是否已买到“{name}”。再次购买前，请先到',
  'My orders': '我的订单',
  ' to see whether it went through.': '查看是否已下单成功。',
  'You are offline: nothing was sent. Buy once the connection is back.': '网络已断开：没有发送任何请求。请在恢复连接后再购买。',
  'The captcha is still loading; one moment.': '验证码还在加载，请稍候。',
  'A captcha is needed first; a new one is on its way.': '需要先输入验证码，新的验证码马上就到。',
  'Reserving your unit…': '正在为你锁定商品…',
  'The shop sent an answer this page does not understand; try again.': '无法识别商城的回复，请重试。',
  'No answer from the shop: nothing was bought (the purchase was not sent). Check your connection, then solve the new captcha and try again.': '商城没有回复：未购买任何商品（购买请求未发出）。请检查网络，输入新的验证码后重试。',
  'Got it! Your unit is reserved and the order is queued.': '抢到了！商品已为你锁定，订单正在排队处理。',
  'Your purchase of {name} went through after all: the order is below.': '你购买的“{name}”其实已经成功，订单见下方。',
  'Last known at {time}; the shop cannot be reached just now.': '这是 {time} 时的数据，目前无法连接商城。',
  'The shop sent an answer this page does not understand; check your order before trying again.': '无法识别商城的回复。再次尝试前，请先查看你的订单。',
  // order.js
  'Checking…': '查询中…',
  'Paying…': '支付中…',
  'Pay now · {price}': '立即支付 · {price}',
  'Pay now': '立即支付',
  'Cancelling…': '正在取消…',
  'Yes, cancel the order': '确定取消',
  'Pay by {time}': '请在 {time} 前支付',
  '({d} left)': '（剩余 {d}）',
  '(time is up)': '（已超时）',
  'not found': '未找到',
  'This order does not exist, or it belongs to another account.': '此订单不存在，或属于其他账号。',
  'Please log in first to see this order.': '请先登录再查看此订单。',
  'Could not reach the shop': '无法连接商城',
  'Could not refresh the status ({why})': '无法刷新订单状态（{why}）',
  '; the status shown is from {time}.': '；当前显示的是 {time} 时的状态。',
  'You are offline': '网络已断开',
  ' Trying again…': '正在重试…',
  'Back online; checking the status…': '网络已恢复，正在查询订单状态…',
  'Sale {id}': '活动 {id}',
  'Cancelling the order…': '正在取消订单…',
  'Order cancelled. Its unit went back on sale; nothing was charged.': '订单已取消，商品已重新开放抢购，未产生任何扣款。',
  'The shop’s answer to the cancellation was lost (the network dropped): the status below says whether the order was cancelled once the shop answers.': '商城对这次取消的回复丢失了（网络中断）。商城回复后，下方的状态会告诉你订单是否已取消。',
  // orders.js
  'Item {id}': '商品 {id}',
  'unknown': '未知',
  'Your unit is reserved; the order is being recorded.': '已为你锁定商品，正在生成订单。',
  'Not paid in time; the unit went back on sale.': '未在规定时间内支付，商品已重新开放抢购。',
  'Cancelled; the unit went back on sale.': '已取消，商品已重新开放抢购。',
  'Could not be completed; nothing was charged.': '未能完成，未产生任何扣款。',
  'Ordered {time}': '下单时间 {time}',
  'Pay or cancel': '支付或取消',
  'View order': '查看订单',
  'Pay or cancel: {item}': '支付或取消：{item}',
  'View order: {item}': '查看订单：{item}',
  'Try again': '重试',
  'Load more': '加载更多',
  'Loading…': '加载中…',
  'Could not load your orders: {why}': '无法加载你的订单：{why}',
  // a fair start's draw: the shopper's pages (sale*.js, status.js, orders_row.js)
  'In the draw': '抽签中',
  'Not drawn': '未中签',
  'This sale\u2019s first moments were a draw: every purchase in them had the same chance, whatever its speed. You were not drawn this time; nothing was charged.': '本场活动开始后的最初几秒为抽签：这段时间内的每次购买中签机会相同，与网速快慢无关。很遗憾，这次你未中签；没有产生任何费用。',
  'You are in the draw: the result comes as soon as the sale\u2019s first seconds close. Nothing is charged unless you are drawn.': '你已参加抽签：活动最初几秒结束后即公布结果。未中签不会产生任何费用。',
  'You were drawn! The unit is reserved for you: pay before the deadline or it goes back on sale.': '恭喜中签！商品已为你保留：请在截止时间前支付，否则商品将重新开放抢购。',
  'You were drawn! Your order of {name} is confirmed: pay before the deadline below, or the unit goes back on sale.': '恭喜中签！你的 {name} 订单已确认：请在下方截止时间前支付，否则商品将重新开放抢购。',
  'You entered the draw for this item.': '你已参加此商品的抽签。',
  'You are in the draw \u2014 the result comes when the first second closes.': '你已参加抽签——开始后的第 1 秒结束时公布结果。',
  'You are in the draw \u2014 the result comes when the first {n} seconds close.': '你已参加抽签——开始后的最初 {n} 秒结束时公布结果。',
  'You are in the draw \u2014 the result comes when the sale\u2019s first seconds close.': '你已参加抽签——活动最初几秒结束时公布结果。',
  'Drawn in the sale\u2019s fair start.': '在本场公平开抢中中签。'
};

// more holds the words other tables add (addWords): the merchant's pages' (i18n_zh_admin.js).
const more = {};

// addWords adds a table of keys and their Chinese to what t knows.
export function addWords(table) {
  Object.assign(more, table);
}

// t returns the words of key in the page's language, with params filled in.
export function t(key, params) {
  var text = key;
  if (lang === 'zh') {
    if (Object.prototype.hasOwnProperty.call(ZH, key)) {
      text = ZH[key];
    } else if (Object.prototype.hasOwnProperty.call(more, key)) {
      text = more[key];
    }
  }
  if (params) {
    text = text.replace(/\{(\w+)\}/g, function (m, k) {
      return Object.prototype.hasOwnProperty.call(params, k) ? String(params[k]) : m;
    });
  }
  return text;
}

// urlLang is the language the page's address names (?lang=), or null.
function urlLang() {
  var l = new URLSearchParams(window.location.search).get('lang');
  return l === 'zh' || l === 'en' ? l : null;
}

// href is a link to one of the shop's pages that keeps the language the address pinned.
export function href(path) {
  var l = urlLang();
  if (!l) {
    return path;
  }
  return path + (path.indexOf('?') < 0 ? '?' : '&') + 'lang=' + l;
}

function remember(l) {
  var secure = window.location.protocol === 'https:' ? '; Secure' : '';
  document.cookie = 'fs_lang=' + l + '; Max-Age=31536000; Path=/; SameSite=Lax' + secure;
}

// initLang runs first on every page with the language switch (the shopper pages). A ?lang=
// address is the shopper's choice: remembered. Without one, the page came in the language of
// Accept-Language; if the shopper chose another, the page is replaced by its ?lang= address.
// It returns true when the page is being replaced (nothing else should start).
export function initLang() {
  if (!document.querySelector('[data-testid="lang-switch"]')) {
    return false;
  }
  var pinned = urlLang();
  if (pinned) {
    if (getCookie('fs_lang') !== pinned) {
      remember(pinned);
    }
    return false;
  }
  var chosen = getCookie('fs_lang');
  if ((chosen === 'zh' || chosen === 'en') && chosen !== lang) {
    var url = new URL(window.location.href);
    url.searchParams.set('lang', chosen);
    window.location.replace(url.toString());
    return true;
  }
  return false;
}
