package static

import (
	"fmt"
	"path"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// minify returns a stylesheet or a module minified, once, at start, before it is hashed (so a
// hashed name names the bytes served): esbuild's Go API, no Node toolchain. A module keeps its
// exported names and its import specifiers (assets.go rewrites them to hashed names after);
// esbuild renames only what is local to it. Other files come back as they are. A file esbuild
// cannot parse is an error: the build is broken (TestEmbeddedAssets fails first).
func minify(name string, src []byte) ([]byte, error) {
	opts := api.TransformOptions{
		MinifyWhitespace:  true,
		MinifyIdentifiers: true,
		MinifySyntax:      true,
		LegalComments:     api.LegalCommentsNone,
		Target:            api.ES2022,
		Sourcefile:        name,
		Charset:           api.CharsetUTF8,
	}
	switch path.Ext(name) {
	case ".js":
		opts.Loader, opts.Format = api.LoaderJS, api.FormatESModule
	case ".css":
		opts.Loader = api.LoaderCSS
		// keep the stylesheet's own syntax: no lowering for older browsers
		opts.Target = api.ESNext
	default:
		return src, nil
	}
	r := api.Transform(string(src), opts)
	if len(r.Errors) > 0 {
		var msgs []string
		for _, m := range r.Errors {
			line := 0
			if m.Location != nil {
				line = m.Location.Line
			}
			msgs = append(msgs, fmt.Sprintf("%s:%d: %s", name, line, m.Text))
		}
		return nil, fmt.Errorf("static: minify %s", strings.Join(msgs, "; "))
	}
	return r.Code, nil
}
