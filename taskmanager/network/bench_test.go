package network

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"
)

func BenchmarkExchange(b *testing.B) {
	for _, mode := range []string{"local", "tcp", "process"} {
		for _, size := range []int{8, 100} {
			b.Run(fmt.Sprintf("%s/%dB", mode, size), func(b *testing.B) {
				benchExchange(b, mode, size)
			})
		}
	}
}

func benchExchange(b *testing.B, mode string, size int) {
	ctx := context.Background()
	n := b.N
	cons := newEnv(b, Config{})
	var spec InputChannelSpec
	var wg sync.WaitGroup
	var stop func()
	switch mode {
	case "process":
		var addr string
		addr, stop = startProducerProcess(b, n, size)
		spec = InputChannelSpec{Partition: "bench", Subpartition: 0, Address: addr}
	default:
		prodEnv := cons
		if mode == "tcp" {
			prodEnv = newEnv(b, Config{})
		}
		p, err := prodEnv.CreateResultPartition(ctx, "bench", Pipelined, 1)
		if err != nil {
			b.Fatal(err)
		}
		spec = InputChannelSpec{Partition: "bench", Subpartition: 0, Address: prodEnv.Addr()}
		defer wg.Wait()
		b.ResetTimer()
		wg.Go(func() {
			rec := make([]byte, size)
			for range n {
				if err := p.Emit(0, rec); err != nil {
					b.Error(err)
					return
				}
			}
			if err := p.Finish(); err != nil {
				b.Error(err)
			}
		})
	}
	g, err := cons.CreateInputGate("bench", []InputChannelSpec{spec})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	if mode == "process" {
		b.ResetTimer()
	}
	start := time.Now()
	got := 0
	for {
		r, err := g.NextRecord(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if r.Event == nil {
			got++
		}
	}
	el := time.Since(start).Seconds()
	b.StopTimer()
	if got != n {
		b.Fatalf("got %d records, want %d", got, n)
	}
	b.ReportMetric(float64(n)/el, "records/s")
	b.ReportMetric(float64(n*size)/el/1e6, "MB/s")
	if stop != nil {
		stop()
	}
}
