package ids

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ResourceID checks a TaskManager resource ID ("host:port-suffix" by
// default, so looser than a Name: the ResultID rule).
func ResourceID(field, s string) error { return ResultID(field, s) }

// fieldRules are the identifier fields of gofl's protos, by name, and their
// rules. A non-empty value anywhere in a message must keep to its rule;
// whether a field may be empty is the handler's business.
var fieldRules = map[protoreflect.Name]func(field, s string) error{
	"job_id":                   JobID,
	"job_vertex_id":            VertexID,
	"allocation_id":            Name,
	"resource_id":              ResourceID,
	"producer_task_manager_id": ResourceID,
	"result_id":                ResultID,
	"job_binary_key":           BlobKey,
	"offloaded_blob_key":       BlobKey,
}

// maxDepth bounds the walk; gofl's messages nest far less.
const maxDepth = 16

// CheckMessage checks every identifier field of m, nested messages and
// lists included, and returns the first violation (naming the field's
// full name and the rule).
func CheckMessage(m proto.Message) error {
	return checkMessage(m.ProtoReflect(), 0)
}

func checkMessage(m protoreflect.Message, depth int) error {
	if depth > maxDepth {
		return nil
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() == protoreflect.StringKind && !fd.IsList() && !fd.IsMap():
			if rule := fieldRules[fd.Name()]; rule != nil && v.String() != "" {
				err = rule(string(fd.FullName()), v.String())
			}
		case fd.Kind() == protoreflect.MessageKind && fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = checkMessage(l.Get(i).Message(), depth+1)
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
			err = checkMessage(v.Message(), depth+1)
		}
		return err == nil
	})
	return err
}

// UnaryServerInterceptor refuses a unary call whose request breaks an
// identifier rule with InvalidArgument, before its handler runs.
func UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if m, ok := req.(proto.Message); ok {
			if err := CheckMessage(m); err != nil {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
		}
		return handler(ctx, req)
	}
}
