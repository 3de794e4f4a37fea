package blob

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/rpc/pb"
)

const chunkSize = 1 << 20

// Service serves a Store over gRPC (pb.BlobServiceServer).
type Service struct {
	pb.UnimplementedBlobServiceServer
	store *Store
}

// NewService serves s.
func NewService(s *Store) *Service { return &Service{store: s} }

// GetBlobByKey streams a blob; a corrupt stored blob fails the stream
// rather than being served.
func (v *Service) GetBlobByKey(req *pb.GetBlobByKeyRequest, stream pb.BlobService_GetBlobByKeyServer) error {
	r, _, err := v.store.Open(req.Key)
	switch {
	case errors.Is(err, ErrInvalidKey):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case err != nil:
		return status.Error(codes.Internal, err.Error())
	}
	defer r.Close()
	buf := make([]byte, chunkSize)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if serr := stream.Send(&pb.BlobChunk{Data: buf[:n]}); serr != nil {
				return serr
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil
		}
		if err != nil {
			return status.Error(codes.DataLoss, err.Error())
		}
	}
}

// Fetcher returns a fetch function for Cache.Get that downloads key from a
// remote BlobService.
func Fetcher(client pb.BlobServiceClient, key string) func(ctx context.Context) (io.ReadCloser, error) {
	return func(ctx context.Context) (io.ReadCloser, error) {
		ctx, cancel := context.WithCancel(ctx)
		stream, err := client.GetBlobByKey(ctx, &pb.GetBlobByKeyRequest{Key: key})
		if err != nil {
			cancel()
			return nil, err
		}
		pr, pw := io.Pipe()
		go func() {
			defer cancel()
			for {
				chunk, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					pw.Close()
					return
				}
				if err != nil {
					pw.CloseWithError(err)
					return
				}
				if _, err := pw.Write(chunk.Data); err != nil {
					return // the reader gave up
				}
			}
		}()
		return pr, nil
	}
}
