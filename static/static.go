// Package static embeds the browser assets: the stylesheet and the script's native ES modules,
// served under /static/ with no build step.
package static

import "embed"

// FS holds style.css and the modules under js/ (js/main.js is the entry), named as they are
// served under /static/.
//
//go:embed style.css js/*.js
var FS embed.FS
