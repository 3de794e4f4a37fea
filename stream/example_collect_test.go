package stream_test

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/gofl/gofl/stream"
)

// A registered job whose results come back through a Collect sink. On a
// session cluster the same lines run it there, with the program as its
// own job binary (stream.ServeRole first in main):
//
//	c, _ := client.New("localhost:8081")
//	res, err := env.ExecuteOn(ctx, c)
func ExampleCollectedValues() {
	stream.RegisterJob("example-lengths", func(env *stream.Environment, args []string) error {
		words := stream.FromCollection(env, args)
		stream.Map(words, func(w string) string { return fmt.Sprintf("%s=%d", w, len(w)) }).Collect().Uid("lengths")
		return nil
	})
	env, err := stream.BuildJob("example-lengths", []string{"gofl", "flink", "go"})
	if err != nil {
		panic(err)
	}
	if _, err := env.Execute(context.Background()); err != nil {
		panic(err)
	}
	lengths, err := stream.CollectedValues[string](env, "lengths")
	if err != nil {
		panic(err)
	}
	sort.Strings(lengths)
	fmt.Println(strings.Join(lengths, " "))
	// Output: flink=5 go=2 gofl=4
}
