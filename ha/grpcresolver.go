package ha

import (
	"fmt"

	"google.golang.org/grpc/resolver"
)

// ResolverScheme is the gRPC target scheme of NewResolver's builder:
// "gofl-leader:///<component>" dials that component's current leader.
const ResolverScheme = "gofl-leader"

// ResolverTarget is the gRPC target that dials component's leader through
// the builder NewResolver returns.
func ResolverTarget(component string) string { return ResolverScheme + ":///" + component }

// NewResolver returns a gRPC resolver builder that follows the leader of
// the target's component through s's leader retrieval: a ClientConn built
// with it (grpc.WithResolvers) connects to every new leader on its own,
// and fails calls fast while there is none. Used by TaskManagers to reach
// the ResourceManager. Each Build starts one LeaderRetriever, which the
// resolver's Close stops.
func NewResolver(s Services) resolver.Builder { return resolverBuilder{s} }

type resolverBuilder struct{ s Services }

func (resolverBuilder) Scheme() string { return ResolverScheme }

func (b resolverBuilder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	component := target.Endpoint()
	if component == "" {
		return nil, fmt.Errorf("%w: gRPC target %q names no component", ErrInvalid, target.URL.String())
	}
	r, err := b.s.LeaderRetriever(component, leaderResolver{cc: cc, component: component})
	if err != nil {
		return nil, err
	}
	return closingResolver{r}, nil
}

// leaderResolver hands every leader change to the ClientConn.
type leaderResolver struct {
	cc        resolver.ClientConn
	component string
}

func (l leaderResolver) NotifyLeaderAddress(info LeaderInformation) {
	if info.IsEmpty() {
		l.cc.ReportError(fmt.Errorf("%w: no leader of %s", ErrUnavailable, l.component))
		return
	}
	_ = l.cc.UpdateState(resolver.State{Addresses: []resolver.Address{{Addr: info.Address}}})
}

func (l leaderResolver) HandleError(err error) { l.cc.ReportError(err) }

type closingResolver struct{ r LeaderRetriever }

func (closingResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (c closingResolver) Close()                              { _ = c.r.Close() }
