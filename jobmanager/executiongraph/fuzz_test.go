package executiongraph_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/simulator"
	"github.com/gofl/gofl/rpc/pb"
)

// FuzzJobGraphProto decodes arbitrary bytes as a JobGraph (the staged
// jobgraph.pb of a per-job cluster; REST bodies are the same message in
// JSON), validates it, and expands a valid one: nothing may panic, and a
// graph Validate accepts must expand. Parallelism is capped so one input
// cannot take the machine's memory (Validate bounds it by 32768 per vertex).
func FuzzJobGraphProto(f *testing.F) {
	for _, batch := range []bool{false, true} {
		b, err := proto.Marshal(jobgraph.ToProto(simulator.WordcountJob(3, batch)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x02, '.', '.'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m pb.JobGraph
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		jg := jobgraph.FromProto(&m)
		if jg.Validate() != nil {
			return
		}
		total := 0
		for _, v := range jg.Vertices {
			total += v.Parallelism
		}
		if total > 1000 {
			return
		}
		if _, err := executiongraph.Build(jg, 1); err != nil {
			t.Fatalf("a valid JobGraph does not expand: %v", err)
		}
	})
}
