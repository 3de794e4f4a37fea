package faultsim

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// endpoint is what listens at one simulated address: gRPC services by
// name, as a grpc.Server holds them.
type endpoint struct {
	node     *Node
	services map[string]service
}

type service struct {
	desc *grpc.ServiceDesc
	impl any
}

// Serve makes node answer at addr with impl, registered under desc as on
// a grpc.Server (pb.TaskExecutorService_ServiceDesc and so on). Serving on
// a restarted node replaces what the old incarnation served there.
func (s *Sim) Serve(node *Node, addr string, desc *grpc.ServiceDesc, impl any) {
	if want := reflect.TypeOf(desc.HandlerType).Elem(); !reflect.TypeOf(impl).Implements(want) {
		panic(fmt.Sprintf("faultsim: %T does not implement %v", impl, want)) // as grpc.Server.RegisterService
	}
	ep := s.endpoints[addr]
	if ep == nil || ep.node != node || !ep.node.alive {
		ep = &endpoint{node: node, services: map[string]service{}}
		s.endpoints[addr] = ep
	}
	ep.services[desc.ServiceName] = service{desc, impl}
}

// Conn is a grpc.ClientConnInterface from node to addr through the
// simulated network; generated clients take it (pb.NewXxxClient(conn)).
func (s *Sim) Conn(from *Node, addr string) grpc.ClientConnInterface {
	return &conn{s: s, from: from, addr: addr}
}

type conn struct {
	s    *Sim
	from *Node
	addr string
}

func (c *conn) Close() error { return nil }

func (c *conn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "faultsim: streaming calls are not simulated")
}

// Invoke delivers one request through the faulty network and runs the
// receiver's handler on the simulation's thread. It sets s.replyDelay: how
// long the answer takes to come back to the caller.
func (c *conn) Invoke(ctx context.Context, method string, args, reply any, _ ...grpc.CallOption) error {
	s := c.s
	ep := s.endpoints[c.addr]
	if ep == nil || !ep.node.alive {
		return status.Errorf(codes.Unavailable, "%s to %s: connection refused", method, c.addr)
	}
	if s.cut[[2]string{c.from.Name, ep.node.Name}] {
		s.replyDelay = s.waitedFor(ctx)
		return status.Errorf(codes.DeadlineExceeded, "%s to %s: no answer (partitioned)", method, c.addr)
	}
	call := handler(ep, method)
	if call == nil {
		return status.Errorf(codes.Unimplemented, "%s: not served at %s", method, c.addr)
	}
	req := args.(proto.Message)
	f := s.net
	if f.Drop > 0 && s.Rand.Float64() < f.Drop/2 {
		s.replyDelay = s.waitedFor(ctx)
		s.tracef("drop request %s %s->%s", method, c.from.Name, ep.node.Name)
		return status.Errorf(codes.DeadlineExceeded, "%s to %s: request lost", method, c.addr)
	}
	resp, err := call(proto.Clone(req))
	if f.Duplicate > 0 && s.Rand.Float64() < f.Duplicate {
		dup, node, inc := proto.Clone(req), ep.node, ep.node.Incarnation
		s.tracef("duplicate %s %s->%s", method, c.from.Name, ep.node.Name)
		s.Clock.AfterFunc(s.latency(), func() {
			if node.alive && node.Incarnation == inc && s.endpoints[c.addr] == ep {
				_, _ = call(dup)
			}
		})
	}
	if f.Drop > 0 && s.Rand.Float64() < f.Drop/2 {
		s.replyDelay = s.waitedFor(ctx)
		s.tracef("drop reply %s %s->%s", method, c.from.Name, ep.node.Name)
		return status.Errorf(codes.DeadlineExceeded, "%s to %s: reply lost", method, c.addr)
	}
	if err != nil {
		return err
	}
	proto.Merge(reply.(proto.Message), resp.(proto.Message))
	return nil
}

// handler finds the unary handler of "/pkg.Service/Method" at ep.
func handler(ep *endpoint, method string) func(req proto.Message) (any, error) {
	name, m, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil
	}
	svc, ok := ep.services[name]
	if !ok {
		return nil
	}
	for _, md := range svc.desc.Methods {
		if md.MethodName == m {
			h := md.Handler
			return func(req proto.Message) (any, error) {
				dec := func(v any) error { proto.Merge(v.(proto.Message), req); return nil }
				return h(svc.impl, context.Background(), dec, nil)
			}
		}
	}
	return nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// waitedFor is how long a caller waits for an answer that never comes: its
// call's deadline (set against the real clock by the endpoint, so rounded
// to keep runs reproducible), or the simulation's call timeout.
func (s *Sim) waitedFor(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl).Round(10 * time.Millisecond); d > 0 {
			return d
		}
	}
	return s.callTimeout
}
