package storage

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/colinmarc/hdfs/v2/hadoopconf"
	krbclient "github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/keytab"
)

// defaultNameNodePort is Hadoop's default NameNode RPC port.
const defaultNameNodePort = "8020"

// loadHadoopConf reads core-site.xml, hdfs-site.xml (and mapred-site.xml)
// from opts.HadoopConfDir, $HADOOP_CONF_DIR, $HADOOP_HOME/etc/hadoop or
// $HADOOP_HOME/conf, the first that has any. No configuration at all is
// not an error: it returns nil and "".
func loadHadoopConf(opts Options) (hadoopconf.HadoopConf, string, error) {
	var dirs []string
	if opts.HadoopConfDir != "" {
		dirs = []string{opts.HadoopConfDir}
	} else {
		if d := os.Getenv("HADOOP_CONF_DIR"); d != "" {
			dirs = append(dirs, d)
		}
		if h := os.Getenv("HADOOP_HOME"); h != "" {
			dirs = append(dirs, filepath.Join(h, "etc", "hadoop"), filepath.Join(h, "conf"))
		}
	}
	for _, d := range dirs {
		c, err := hadoopconf.Load(d)
		if err != nil {
			return nil, d, fmt.Errorf("%w: reading the Hadoop configuration in %s: %v", ErrInvalid, d, err)
		}
		if c != nil {
			return c, d, nil
		}
	}
	if opts.HadoopConfDir != "" {
		return nil, opts.HadoopConfDir, fmt.Errorf("%w: Hadoop configuration directory %s has no core-site.xml or hdfs-site.xml", ErrInvalid, opts.HadoopConfDir)
	}
	return nil, "", nil
}

// nameNodes resolves the NameNode RPC addresses for an hdfs:// URI's
// authority (empty for hdfs:///path): a logical HA nameservice from the
// Hadoop configuration, else host[:port]. An empty authority takes
// fs.defaultFS, and failing that dfs.namenode.rpc-address.
func nameNodes(authority string, hc hadoopconf.HadoopConf, confDir string) ([]string, error) {
	if authority == "" {
		def := hc["fs.defaultFS"]
		if def == "" {
			def = hc["fs.default.name"]
		}
		if def != "" {
			u, err := url.Parse(def)
			if err != nil || u.Scheme != "hdfs" || u.Host == "" {
				return nil, fmt.Errorf("%w: fs.defaultFS %q in %s is not an hdfs://host URI", ErrInvalid, def, confDir)
			}
			authority = u.Host
		} else if a := hc["dfs.namenode.rpc-address"]; a != "" {
			return []string{a}, nil
		} else {
			where := "no Hadoop configuration was found (set HADOOP_CONF_DIR)"
			if confDir != "" {
				where = "neither fs.defaultFS nor dfs.namenode.rpc-address is set in " + confDir
			}
			return nil, fmt.Errorf("%w: hdfs:/// names no NameNode and %s", ErrInvalid, where)
		}
	}
	host := authority
	if h, _, err := net.SplitHostPort(authority); err == nil {
		host = h
	}
	// A logical nameservice: dfs.ha.namenodes.<ns> = nn1,nn2 with
	// dfs.namenode.rpc-address.<ns>.<nn> each.
	if ids := hc["dfs.ha.namenodes."+host]; ids != "" && host == authority {
		var addrs []string
		for _, id := range strings.Split(ids, ",") {
			id = strings.TrimSpace(id)
			if a := hc["dfs.namenode.rpc-address."+host+"."+id]; a != "" {
				addrs = append(addrs, a)
			}
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("%w: nameservice %s in %s has no dfs.namenode.rpc-address.%s.* entries", ErrInvalid, host, confDir, host)
		}
		sort.Strings(addrs)
		return addrs, nil
	}
	// A single nameservice without HA: dfs.namenode.rpc-address.<ns>.
	if a := hc["dfs.namenode.rpc-address."+host]; a != "" && host == authority {
		return []string{a}, nil
	}
	if host == authority {
		return []string{net.JoinHostPort(host, defaultNameNodePort)}, nil
	}
	if _, port, _ := net.SplitHostPort(authority); port == "" {
		return nil, fmt.Errorf("%w: NameNode address %q has an empty port", ErrInvalid, authority)
	} else if _, err := strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("%w: NameNode address %q has a bad port", ErrInvalid, authority)
	}
	return []string{authority}, nil
}

// hdfsUser is the user the client acts as without Kerberos.
func hdfsUser(opts Options) (string, error) {
	if opts.User != "" {
		return opts.User, nil
	}
	if u := os.Getenv("HADOOP_USER_NAME"); u != "" {
		return u, nil
	}
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("%w: no HDFS user: Options.User and HADOOP_USER_NAME are empty and the OS user is unknown: %v", ErrInvalid, err)
	}
	return u.Username, nil
}

// kerberosWanted reports whether Kerberos is configured or required.
func kerberosWanted(k KerberosOptions, hc hadoopconf.HadoopConf) bool {
	return k.Keytab != "" || k.UseTicketCache || strings.EqualFold(hc["hadoop.security.authentication"], "kerberos")
}

// kerberosClient builds a gokrb5 client from the options; it does not
// contact the KDC (colinmarc/hdfs logs in on the first NameNode
// connection). servicePrincipal is the NameNode SPN with any realm removed,
// as colinmarc/hdfs wants it.
func kerberosClient(k KerberosOptions, hc hadoopconf.HadoopConf) (cl *krbclient.Client, servicePrincipal string, err error) {
	spn := k.ServicePrincipal
	if spn == "" {
		spn = hc["dfs.namenode.kerberos.principal"]
	}
	spn, _, _ = strings.Cut(spn, "@")
	if spn == "" {
		return nil, "", fmt.Errorf("%w: kerberos: no NameNode service principal: set it in the options or dfs.namenode.kerberos.principal in hdfs-site.xml", ErrInvalid)
	}
	confPath := k.Krb5Conf
	if confPath == "" {
		confPath = os.Getenv("KRB5_CONFIG")
	}
	if confPath == "" {
		confPath = "/etc/krb5.conf"
	}
	cfg, err := krbconfig.Load(confPath)
	if err != nil {
		return nil, "", fmt.Errorf("%w: kerberos: reading krb5.conf %s: %v", ErrInvalid, confPath, err)
	}
	settings := []func(*krbclient.Settings){krbclient.DisablePAFXFAST(true)}
	switch {
	case k.Keytab != "":
		if k.Principal == "" {
			return nil, "", fmt.Errorf("%w: kerberos: keytab %s given without a principal", ErrInvalid, k.Keytab)
		}
		kt, err := keytab.Load(k.Keytab)
		if err != nil {
			return nil, "", fmt.Errorf("%w: kerberos: reading keytab %s: %v", ErrInvalid, k.Keytab, err)
		}
		name, realm, _ := strings.Cut(k.Principal, "@")
		if realm == "" {
			realm = cfg.LibDefaults.DefaultRealm
		}
		if realm == "" {
			return nil, "", fmt.Errorf("%w: kerberos: principal %q has no realm and %s sets no default_realm", ErrInvalid, k.Principal, confPath)
		}
		return krbclient.NewWithKeytab(name, realm, kt, cfg, settings...), spn, nil
	case k.UseTicketCache:
		cc := os.Getenv("KRB5CCNAME")
		cc = strings.TrimPrefix(cc, "FILE:")
		if cc == "" {
			cc = fmt.Sprintf("/tmp/krb5cc_%d", os.Getuid())
		}
		ccache, err := credentials.LoadCCache(cc)
		if err != nil {
			return nil, "", fmt.Errorf("%w: kerberos: reading the ticket cache %s (run kinit): %v", ErrInvalid, cc, err)
		}
		cl, err := krbclient.NewFromCCache(ccache, cfg, settings...)
		if err != nil {
			return nil, "", fmt.Errorf("%w: kerberos: ticket cache %s: %v", ErrInvalid, cc, err)
		}
		return cl, spn, nil
	default:
		return nil, "", fmt.Errorf("%w: kerberos: the Hadoop configuration sets hadoop.security.authentication=kerberos but no keytab or ticket cache is configured", ErrInvalid)
	}
}
