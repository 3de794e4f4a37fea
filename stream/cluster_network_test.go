package stream

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/taskmanager/network"
	"github.com/rs/zerolog"
)

func shuffleEnv(t *testing.T) *network.ShuffleEnvironment {
	t.Helper()
	e, err := network.NewShuffleEnvironment(network.Config{SpillDir: t.TempDir()}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func producerPartition(result string, index int32) network.ResultPartitionID {
	return partitionID(result, index, &pb.ExecutionAttemptID{JobVertexId: "src", SubtaskIndex: index, Graph: 1})
}

// wantMissing checks that a task failing with err reports
// partition-data-missing for partition to the JobMaster.
func wantMissing(t *testing.T, err error, partition network.ResultPartitionID, msg string) {
	t.Helper()
	fi := failure.Encode(classifyNetwork(err))
	if fi.GetType() != "partition-data-missing" || fi.GetMissingPartition() != string(partition) {
		t.Errorf("failure %q missing %q, want partition-data-missing for %q (%v)", fi.GetType(), fi.GetMissingPartition(), partition, err)
	}
	if !strings.Contains(fi.GetMessage(), msg) {
		t.Errorf("message %q does not contain %q", fi.GetMessage(), msg)
	}
}

// TestTaskFailureProducerUnreachable: a consumer whose producer's data
// address has nothing listening fails as partition-data-missing for that
// producer's partition, so the JobMaster reruns the producer.
func TestTaskFailureProducerUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	cons := shuffleEnv(t)
	pid := producerPartition("r1", 3)
	_, err = cons.CreateInputGate("task#0/input-0", []network.InputChannelSpec{{Partition: pid, Subpartition: 0, Address: dead}})
	if err == nil {
		t.Fatal("gate created against a dead producer")
	}
	wantMissing(t, err, pid, fmt.Sprintf("cannot connect to producer of partition %s at %s: connection refused", pid, dead))
}

// TestTaskFailureProducerLost: a producer runner that goes away mid-stream
// fails each consumer as partition-data-missing for its own partition,
// although their channels share one connection.
func TestTaskFailureProducerLost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prod, cons := shuffleEnv(t), shuffleEnv(t)
	pids := []network.ResultPartitionID{producerPartition("r1", 0), producerPartition("r1", 1)}
	var gates []*network.InputGate
	for i, pid := range pids {
		p, err := prod.CreateResultPartition(ctx, pid, network.Pipelined, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Emit(0, []byte("rec")); err != nil {
			t.Fatal(err)
		}
		p.Flush()
		g, err := cons.CreateInputGate(fmt.Sprintf("task#%d/input-0", i), []network.InputChannelSpec{{Partition: pid, Address: prod.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		if r, err := g.NextRecord(ctx); err != nil || string(r.Record) != "rec" {
			t.Fatalf("got %q %v", r.Record, err)
		}
		gates = append(gates, g)
	}
	if _, _, dials := cons.ConnectionManager().ConnectionCounts(); dials != 1 {
		t.Fatalf("%d connections dialed, want one shared", dials)
	}
	addr := prod.Addr()
	prod.Close()
	for i, g := range gates {
		_, err := g.NextRecord(ctx)
		if err == nil {
			t.Fatalf("gate %d: a record after the producer left", i)
		}
		wantMissing(t, err, pids[i], fmt.Sprintf("lost connection to producer of partition %s at %s", pids[i], addr))
	}
}

// TestTaskFailureProtocolViolationIsNotMissingData: only a failed
// transport means the producer is gone.
func TestTaskFailureProtocolViolationIsNotMissingData(t *testing.T) {
	err := classifyNetwork(&network.ChannelError{Err: &network.ProtocolError{Peer: "x", Msg: "bad"}})
	if fi := failure.Encode(err); fi.GetType() == "partition-data-missing" {
		t.Errorf("a protocol violation classified as %q", fi.GetType())
	}
}
