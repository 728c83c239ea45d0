// Package static embeds the browser assets: the stylesheet and the script's native ES modules,
// served under /static/ with no build step, each under a content-hashed name (assets.go).
package static

import "embed"

// FS holds style.css and the modules under js/ (js/main.js is the entry), named as they are
// embedded; pages name them through Path, which gives their hashed URL.
//
//go:embed style.css js/*.js
var FS embed.FS
