// Package static holds the browser assets (the script and the stylesheet) embedded in the binary,
// served under /static/ with no build step.
package static

import "embed"

// FS holds app.js and style.css, named as they are served under /static/.
//
//go:embed app.js style.css
var FS embed.FS
