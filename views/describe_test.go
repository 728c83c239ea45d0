package views

import (
	"context"
	"strings"
	"testing"
)

// Every page has a meta description of its own in both languages, the sale page's naming the
// sale, and the layout writes it.
func TestPageDescriptions(t *testing.T) {
	for _, l := range Langs {
		for page := range pageModules {
			d, ok := pageDescriptions[l][page]
			if !ok || len([]rune(d)) < 12 {
				t.Errorf("%s: page %q has no meta description of its own", l, page)
			}
		}
		if len(pageDescriptions[l]) != len(pageModules) {
			t.Errorf("%s: %d descriptions for %d pages", l, len(pageDescriptions[l]), len(pageModules))
		}
		ctx := WithLocale(context.Background(), Locale{Lang: l})
		if got := pageDescription(ctx, pageSale, "Spring Drop"); !strings.HasPrefix(got, "Spring Drop") || strings.Contains(got, "%") {
			t.Errorf("%s: the sale page's description %q does not name the sale", l, got)
		}
		var b strings.Builder
		if err := NotFoundPage("gone").Render(ctx, &b); err != nil {
			t.Fatal(err)
		}
		want := `<meta name="description" content="` + pageDescriptions[l][pageNotFound] + `">`
		if !strings.Contains(b.String(), want) {
			t.Errorf("%s: the 404 page has no %s", l, want)
		}
	}
}
