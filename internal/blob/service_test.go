package blob

import (
	"bytes"
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/rpc/pb"
)

func TestFetchOverGRPC(t *testing.T) {
	server, _ := Open(t.TempDir())
	data := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // several chunks
	key, _, err := server.Put(bytes.NewReader(data), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterBlobServiceServer(srv, NewService(server))
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewBlobServiceClient(conn)

	local, _ := Open(t.TempDir())
	cache := NewCache(local)
	defer cache.Close()
	p, err := cache.Get(context.Background(), key, Fetcher(client, key))
	if err != nil {
		t.Fatal(err)
	}
	if err := local.Verify(key); err != nil || p == "" {
		t.Fatalf("fetched blob: %v", err)
	}
	missing := KeyOf([]byte("missing"))
	if _, err := cache.Get(context.Background(), missing, Fetcher(client, missing)); status.Code(unwrapStatus(err)) != codes.NotFound {
		t.Fatalf("missing blob: %v", err)
	}
	stream, err := client.GetBlobByKey(context.Background(), &pb.GetBlobByKeyRequest{Key: "sha256:../../etc/passwd"})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("malformed key: %v", err)
	}
}

// unwrapStatus finds the gRPC status inside a wrapped error.
func unwrapStatus(err error) error {
	for e := err; e != nil; {
		if _, ok := status.FromError(e); ok {
			return e
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		e = u.Unwrap()
	}
	return err
}
