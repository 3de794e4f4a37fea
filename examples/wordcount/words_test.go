package main

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

// wordsReference is the tokeniser's definition: lower-case the line, split
// it at everything that is neither a letter nor a digit.
func wordsReference(line string) []string {
	return strings.FieldsFunc(strings.ToLower(line), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func TestWordsMatchesDefinition(t *testing.T) {
	for _, line := range []string{
		"", " ", "a", "A", "Hello, World!", "to be or not to be", "köln Café 東京 NAÏVE naïve",
		"x1 2y Z9z", "tab\tsep\nnl", "ÀB cÀ", "mixed-Case_words42 end.", "\xff bad \xfe utf8\xffX",
		"ΣΊΣΥΦΟΣ", "trailing ", "  lead", "aBc", "Ab", "über ÜBER Über",
	} {
		got, want := Words(line), wordsReference(line)
		if !slices.Equal(got, want) {
			t.Errorf("Words(%q) = %q, want %q", line, got, want)
		}
	}
}

func FuzzWords(f *testing.F) {
	f.Add("Hello, Wörld 42x")
	f.Fuzz(func(t *testing.T, line string) {
		got, want := Words(line), wordsReference(line)
		// strings.ToLower can change a word's length or letter-ness only
		// for a few runes (İ), where per-word lowering is the definition
		// jobmanager's tests count with; compare on plain letters only.
		if strings.ContainsRune(line, 'İ') {
			return
		}
		if !slices.Equal(got, want) {
			t.Errorf("Words(%q) = %q, want %q", line, got, want)
		}
	})
}

func BenchmarkEachWord(b *testing.B) {
	line := "the stream köln word123 Flink operator window café state checkpoint slot region word42 東京 naïve"
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		EachWord(line, func(string) { n++ })
	}
}
