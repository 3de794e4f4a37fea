package network

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
)

// TestAllToAll runs N producers × M consumers over 3 runners (environments),
// so every gate has local and remote channels.
func TestAllToAll(t *testing.T) {
	for _, recSize := range []int{12, 100, 70000} { // the last spans buffers
		t.Run(fmt.Sprint(recSize), func(t *testing.T) {
			cfg := Config{BufferSize: 32 * 1024}
			envs := []*ShuffleEnvironment{newEnv(t, cfg), newEnv(t, cfg), newEnv(t, cfg)}
			const producers, consumers = 4, 5
			perSub := 3000
			if recSize > 1000 {
				perSub = 40
			}
			ctx := testCtx(t)
			parts := make([]*ResultPartition, producers)
			for p := range producers {
				rp, err := envs[p%len(envs)].CreateResultPartition(ctx, ResultPartitionID(fmt.Sprintf("p%d", p)), Pipelined, consumers)
				if err != nil {
					t.Fatal(err)
				}
				parts[p] = rp
			}
			gates := make([]*InputGate, consumers)
			for c := range consumers {
				env := envs[c%len(envs)]
				var specs []InputChannelSpec
				for p := range producers {
					specs = append(specs, InputChannelSpec{Partition: parts[p].ID(), Subpartition: c, Address: envs[p%len(envs)].Addr()})
				}
				g, err := env.CreateInputGate(fmt.Sprintf("g%d", c), specs)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(g.Close)
				gates[c] = g
			}
			var wg sync.WaitGroup
			for p, rp := range parts {
				wg.Go(func() {
					buf := make([]byte, 0, recSize)
					for i := range perSub {
						for c := range consumers {
							if err := rp.Emit(c, record(buf, p, i, recSize)); err != nil {
								t.Error(err)
								return
							}
						}
						if i == perSub/2 {
							if err := rp.BroadcastEvent(CheckpointBarrier{CheckpointID: 7, Timestamp: int64(p)}); err != nil {
								t.Error(err)
							}
							if err := rp.Broadcast(record(buf, p, -1, recSize)); err != nil {
								t.Error(err)
							}
						}
					}
					if err := rp.Finish(); err != nil {
						t.Error(err)
					}
				})
			}
			for c, g := range gates {
				wg.Go(func() {
					next := make([]int, producers)
					barrier := make([]bool, producers)
					bcast := make([]bool, producers)
					eop := 0
					drain(ctx, t, g, func(ch int, rec []byte) {
						p := int(binary.BigEndian.Uint32(rec))
						seq := int(int64(binary.BigEndian.Uint64(rec[4:])))
						if p != ch || len(rec) != recSize || !bytes.Equal(rec, record(nil, p, seq, recSize)) {
							t.Errorf("gate %d channel %d: bad record from %d (%d bytes)", c, ch, p, len(rec))
							return
						}
						if seq == -1 {
							if !barrier[p] || bcast[p] || next[p] != perSub/2+1 {
								t.Errorf("gate %d: broadcast record out of place", c)
							}
							bcast[p] = true
							return
						}
						if seq != next[p] {
							t.Errorf("gate %d channel %d: got seq %d want %d", c, ch, seq, next[p])
						}
						if (seq > perSub/2) != barrier[p] {
							t.Errorf("gate %d channel %d: seq %d on the wrong side of the barrier", c, ch, seq)
						}
						next[p] = seq + 1
					}, func(ch int, ev Event) {
						switch ev := ev.(type) {
						case CheckpointBarrier:
							if ev.CheckpointID != 7 || ev.Timestamp != int64(ch) || barrier[ch] {
								t.Errorf("bad barrier %+v on %d", ev, ch)
							}
							barrier[ch] = true
						case EndOfPartition:
							eop++
						}
					})
					for p := range producers {
						if next[p] != perSub || !bcast[p] {
							t.Errorf("gate %d: channel %d delivered %d records (broadcast %v), want %d", c, p, next[p], bcast[p], perSub)
						}
					}
					if eop != producers {
						t.Errorf("gate %d: %d EndOfPartition", c, eop)
					}
					m := g.Metrics()
					if m.NumRecordsIn != int64(producers*(perSub+1)) {
						t.Errorf("gate %d: NumRecordsIn %d", c, m.NumRecordsIn)
					}
				})
			}
			wg.Wait()
			for _, rp := range parts {
				m := rp.Metrics()
				if m.NumRecordsOut != int64(consumers*(perSub+1)) {
					t.Errorf("NumRecordsOut %d", m.NumRecordsOut)
				}
			}
		})
	}
}
