// Command wordcount is gofl's batch word count, the SDK's first example: it
// counts the words of a text file (or of every file in a directory) and
// writes one "word count" line per distinct word into part files in an
// output directory. A word is a maximal run of Unicode letters or digits,
// lowercased.
//
// Run it in-process:
//
//	go run ./examples/wordcount --input README.md --output /tmp/counts
//
// or on a cluster, its data crossing the network between TaskManagers:
//
//	gofl run -p 4 ./examples/wordcount --input /data/text --output /tmp/counts
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gofl/gofl/stream"
)

// WordCount is a word and how often it occurred.
type WordCount struct {
	Word  string
	Count int64
}

func init() { stream.RegisterJob("wordcount", build) }

func main() { stream.Main() }

func build(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("wordcount", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	input := fs.String("input", "", "text file or directory of text files to count (a path, file:// or hdfs:// URI)")
	output := fs.String("output", "", "directory the part files with the counts go to (a path, file:// or hdfs:// URI); it must not exist or be empty")
	overwrite := fs.Bool("overwrite", false, "replace an existing --output directory (Flink's WriteMode.OVERWRITE)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w (usage: wordcount --input PATH --output DIR)", err)
	}
	if *input == "" || *output == "" || fs.NArg() > 0 {
		return errors.New("usage: wordcount --input PATH --output DIR")
	}
	env.SetRuntimeMode(stream.Batch)
	lines := stream.TextFile(env, *input)
	words := stream.FlatMap(lines, func(line string, out stream.Collector[WordCount]) error {
		EachWord(line, func(w string) { out.Collect(WordCount{Word: w, Count: 1}) })
		return nil
	}).Name("Tokenizer")
	counts := stream.KeyBy(words, func(w WordCount) string { return w.Word }).
		Reduce(func(a, b WordCount) WordCount { return WordCount{Word: a.Word, Count: a.Count + b.Count} }).Name("Count")
	stream.Map(counts, func(w WordCount) string { return fmt.Sprintf("%s %d", w.Word, w.Count) }).Name("Format").
		WriteAsText(*output, writeMode(*overwrite)).Name("Counts")
	return nil
}

func writeMode(overwrite bool) stream.WriteMode {
	if overwrite {
		return stream.Overwrite
	}
	return stream.NoOverwrite
}

// Words splits a line into its words: maximal runs of Unicode letters or
// digits, lowercased.
func Words(line string) []string {
	var words []string
	EachWord(line, func(w string) { words = append(words, w) })
	return words
}

// EachWord calls emit with each word of line, as Words splits them, without
// allocating for words already in lower case: those are substrings of line.
// Its state lives in locals of one loop (no closure over them), which keeps
// it in registers: this runs per byte of the input.
func EachWord(line string, emit func(word string)) {
	for i := 0; i < len(line); {
		// Skip to the next word's first byte.
		if c := line[i]; c < utf8.RuneSelf {
			if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
				i++
				continue
			}
		} else if r, size := utf8.DecodeRuneInString(line[i:]); !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			i += size
			continue
		}
		start, lower := i, true
		for i < len(line) {
			c := line[i]
			if c < utf8.RuneSelf { // ASCII fast path
				if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
					i++
					continue
				}
				if 'A' <= c && c <= 'Z' {
					lower = false
					i++
					continue
				}
				break
			}
			r, size := utf8.DecodeRuneInString(line[i:])
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				break
			}
			lower = lower && unicode.ToLower(r) == r
			i += size
		}
		if w := line[start:i]; lower {
			emit(w)
		} else {
			emit(strings.ToLower(w))
		}
	}
}
