package client

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/tlsconf"
	"github.com/gofl/gofl/storage"
)

// Files of a generated per-cluster CA in the cluster's staging directory.
const (
	InternalCertFile = "internal-tls-cert.pem"
	InternalKeyFile  = "internal-tls-key.pem"
	InternalCAFile   = "internal-tls-ca.pem"
)

// internalCertValidity is how long a generated cluster certificate is
// valid: a session cluster older than that must be deployed anew.
const internalCertValidity = 365 * 24 * time.Hour

// stageInternalTLS decides internal TLS for a cluster a provider deploys:
// on unless security.ssl.internal.enabled says false (conf.SSLInternalOn).
// When on and no certificate is configured, it generates a per-cluster CA
// and leaf (tlsconf.Generate) and stages them readable by the cluster's
// user only; the cluster's processes read them from there (the options
// name the staged URIs, so no key travels in a command line or a Nomad
// job spec). It records its options in extra.
func (d *ClusterDescriptor) stageInternalTLS(ctx context.Context, st *storage.Staging, clusterID string, extra map[string]string) error {
	c := d.cfg.Clone()
	for k, v := range extra {
		if err := c.Set(k, v, conf.DynamicSource); err != nil {
			return fmt.Errorf("client: %w", err)
		}
	}
	if !conf.SSLInternalOn(c, true) {
		return nil
	}
	extra[conf.SSLInternalEnabled.Key()] = "true"
	for _, o := range []*conf.Option[string]{conf.SSLInternalKeystore, conf.SSLInternalCert} {
		if o.Get(c) != "" {
			return nil // the user's PKI
		}
	}
	var hosts []string
	for _, o := range []*conf.Option[string]{conf.JobManagerRPCAddress, conf.RestAddress, conf.TaskManagerHost} {
		if h := o.Get(c); h != "" {
			if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
				hosts = append(hosts, h)
			}
		}
	}
	m, err := tlsconf.Generate(clusterID, hosts, internalCertValidity)
	if err != nil {
		return fmt.Errorf("client: generating the cluster's CA: %w", err)
	}
	cdir, err := st.ClusterDir(clusterID)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
		opt  *conf.Option[string]
	}{{InternalCertFile, m.Cert, conf.SSLInternalCert}, {InternalKeyFile, m.Key, conf.SSLInternalKey}, {InternalCAFile, m.CA, conf.SSLInternalCA}} {
		if err := st.PutClusterSecretFile(ctx, clusterID, f.name, bytes.NewReader(f.data)); err != nil {
			return fmt.Errorf("client: staging the cluster's certificates: %w", err)
		}
		extra[f.opt.Key()] = st.FileSystem().URI(cdir + "/" + f.name)
	}
	d.log.Info().Str("cluster_id", clusterID).Msg("internal TLS on with a generated per-cluster CA")
	return nil
}
