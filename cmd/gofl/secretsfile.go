package main

import (
	"context"
	"fmt"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/tlsconf"
	"github.com/gofl/gofl/storage"
)

// notTaskManagerSecrets are the secret options a TaskManager leaves in the
// cluster's secrets file: it serves no REST and deploys nothing.
var notTaskManagerSecrets = []string{"rest.authentication.", "security.ssl.rest.", "provider.nomad."}

// applySecretsFile reads deployment.secrets-file, when set, into cfg: how a
// deployed process gets its passwords and tokens without them being on its
// command line. skip lists key prefixes the process does not take.
func applySecretsFile(ctx context.Context, cfg *conf.Configuration, skip ...string) error {
	file := conf.DeploymentSecretsFile.Get(cfg)
	if file == "" {
		return nil
	}
	b, err := tlsconf.ReadStorage(storage.OptionsFromConf(cfg))(ctx, file)
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", conf.DeploymentSecretsFile.Key(), file, err)
	}
	return conf.ApplySecrets(cfg, file, b, skip...)
}
