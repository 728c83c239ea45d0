package handlers

import (
	"strings"

	"github.com/gin-gonic/gin"
)

// publicOriginKey holds, in a request's gin context, the configured public address that origin
// answers instead of the request's own.
const publicOriginKey = "flashsale.publicOrigin"

// PublicOrigin runs before a handler whose answer names the shop's address and is cached for
// every visitor (GET /sales/{id}/calendar.ics: its URL line): with PublicURL set, origin answers
// it, never the Host header a client sent, so a forged Host cannot put another address in a copy
// a cache hands to everyone. Unset, the answer names the request's own address, as before.
func (p *Pages) PublicOrigin(c *gin.Context) {
	if u := strings.TrimRight(p.PublicURL, "/"); u != "" {
		c.Set(publicOriginKey, u)
	}
}
