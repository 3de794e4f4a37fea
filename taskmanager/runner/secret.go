package runner

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The TaskManager↔runner link is a Unix socket in the job's directory, not
// TLS: both ends run as the cluster's user on one host, where the kernel's
// file permissions already decide who may connect, and TLS would only add
// handshakes and a copy of the key. The socket is 0600 inside a 0700
// directory, and every call carries a per-runner secret the TaskManager
// passes in the runner's environment (EnvSecret), so that a process of the
// same user that did not start the runner, or a socket left by another
// runner, is refused as well.
const (
	// EnvSecret is the runner's per-start secret (hex).
	EnvSecret = "GOFL_RUNNER_SECRET"
	// secretHeader is the gRPC metadata key carrying it.
	secretHeader = "gofl-runner-secret"
)

func newSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// secretCreds attaches the runner's secret to every call of the
// TaskManager's client; the link is a local socket, so no transport
// security is required for it.
type secretCreds string

func (s secretCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{secretHeader: string(s)}, nil
}

func (secretCreds) RequireTransportSecurity() bool { return false }

// checkSecret refuses a call without the runner's secret.
func checkSecret(ctx context.Context, secret string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get(secretHeader) {
		if subtle.ConstantTimeCompare([]byte(v), []byte(secret)) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "runner: the caller is not the TaskManager that started this runner (no or wrong runner secret)")
}

// secretInterceptors check every unary and streaming call.
func secretInterceptors(secret string) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := checkSecret(ctx, secret); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := checkSecret(ss.Context(), secret); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}
