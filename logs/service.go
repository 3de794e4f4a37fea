package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/rpc/pb"
)

const chunkSize = 256 << 10

// Service serves a Source over gRPC (pb.LogServiceServer); TaskManagers
// register it on their RPC server.
type Service struct {
	pb.UnimplementedLogServiceServer
	src Source
}

// NewService serves src.
func NewService(src Source) *Service { return &Service{src: src} }

// ListLogs implements pb.LogServiceServer.
func (s *Service) ListLogs(context.Context, *pb.ListLogsRequest) (*pb.ListLogsResponse, error) {
	resp := &pb.ListLogsResponse{}
	for _, f := range s.src.List() {
		resp.Logs = append(resp.Logs, &pb.LogFileInfo{Name: f.Name, Size: f.Size, Mtime: f.MTime})
	}
	return resp, nil
}

// ReadLog implements pb.LogServiceServer.
func (s *Service) ReadLog(req *pb.ReadLogRequest, stream pb.LogService_ReadLogServer) error {
	if req.Offset < 0 || req.Length < 0 || req.TailLines < 0 || req.TailLines > MaxTailLines {
		return status.Error(codes.InvalidArgument, "logs: negative or too large range")
	}
	f, err := s.src.Lookup(req.LogName)
	if err != nil {
		return statusOf(err)
	}
	w := &chunkWriter{stream: stream}
	size, _, err := Copy(w, f.path, Range{Offset: req.Offset, Length: req.Length, Tail: int(req.TailLines)})
	if err != nil {
		return statusOf(err)
	}
	if !w.sent { // nothing to read: still tell the size
		return stream.Send(&pb.LogChunk{Size: size})
	}
	return nil
}

// chunkWriter sends what it is given as LogChunks, the first with the size.
type chunkWriter struct {
	stream pb.LogService_ReadLogServer
	sent   bool
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := p[:min(len(p), chunkSize)]
		if err := w.stream.Send(&pb.LogChunk{Data: c}); err != nil {
			return n, err
		}
		w.sent = true
		n += len(c)
		p = p[len(c):]
	}
	return n, nil
}

func statusOf(err error) error {
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, os.ErrNotExist):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

// ListRemote lists a TaskManager's logs through its LogService.
func ListRemote(ctx context.Context, c pb.LogServiceClient) ([]File, error) {
	resp, err := c.ListLogs(ctx, &pb.ListLogsRequest{})
	if err != nil {
		return nil, errorOf(err)
	}
	out := make([]File, 0, len(resp.Logs))
	for _, l := range resp.Logs {
		out = append(out, File{Name: l.Name, Size: l.Size, MTime: l.Mtime})
	}
	return out, nil
}

// ReadRemote copies part of a TaskManager's log to w through its
// LogService. Errors wrap ErrNotFound or ErrInvalid where the TaskManager
// said so.
func ReadRemote(ctx context.Context, c pb.LogServiceClient, name string, r Range, w io.Writer) error {
	if err := CheckName(name); err != nil {
		return err
	}
	stream, err := c.ReadLog(ctx, &pb.ReadLogRequest{LogName: name, Offset: r.Offset, Length: r.Length, TailLines: int32(r.Tail)})
	if err != nil {
		return errorOf(err)
	}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errorOf(err)
		}
		if _, err := w.Write(chunk.Data); err != nil {
			return err
		}
	}
}

func errorOf(err error) error {
	switch status.Code(err) {
	case codes.NotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, status.Convert(err).Message())
	case codes.InvalidArgument:
		return fmt.Errorf("%w: %s", ErrInvalid, status.Convert(err).Message())
	}
	return fmt.Errorf("logs: %w", err)
}
