package conf

import (
	"errors"
	"fmt"
	"strings"
)

// Markers around the generated reference in README.md.
const (
	BeginGeneratedMarker = "<!-- BEGIN GENERATED CONFIG -->"
	EndGeneratedMarker   = "<!-- END GENERATED CONFIG -->"
)

// ErrNoMarkers is returned by ReplaceGenerated when a document lacks the
// generated-section markers.
var ErrNoMarkers = errors.New("conf: generated config markers not found")

// MarkdownReference renders every registered option as a Markdown table
// (key | type | default | description), sorted by key.
func MarkdownReference() string {
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Description |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, s := range Options() {
		desc := s.Description()
		if a := s.Allowed(); len(a) > 0 {
			desc += " Values: `" + strings.Join(a, "`, `") + "`."
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n",
			s.Key(), s.Type(), mdCode(s.DefaultString()), mdEscape(desc))
	}
	return b.String()
}

func mdCode(s string) string {
	if s == "" {
		return "(none)"
	}
	return "`" + mdEscape(s) + "`"
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// ReplaceGenerated returns doc with the text between the markers replaced by
// generated. The markers themselves stay.
func ReplaceGenerated(doc, generated string) (string, error) {
	begin := strings.Index(doc, BeginGeneratedMarker)
	end := strings.Index(doc, EndGeneratedMarker)
	if begin < 0 || end < begin {
		return "", fmt.Errorf("%w (%s ... %s)", ErrNoMarkers, BeginGeneratedMarker, EndGeneratedMarker)
	}
	head := doc[:begin+len(BeginGeneratedMarker)]
	return head + "\n" + generated + doc[end:], nil
}
