#!/usr/bin/env bash
# run.sh DIR: creates an MIT Kerberos realm ($KDC_REALM, GOFL.TEST) in DIR
# and runs its krb5kdc in the foreground on 127.0.0.1:$KDC_PORT (TCP and
# UDP). Prints "KDC READY ..." once the KDC answers, and stops on SIGTERM.
#
# DIR gets krb5.conf (clients: KRB5_CONFIG, java.security.krb5.conf),
# kdc.conf, the database, and these keytabs:
#   hdfs.keytab   hdfs/localhost and HTTP/localhost (the NameNode, DataNode
#                 and SPNEGO for WebHDFS)
#   user.keytab   $KDC_USER (gofl), the principal gofl runs as
#   wrong.keytab  $KDC_USER with an old key the KDC no longer has
#   other.keytab  $KDC_OTHER_USER (gofl-other), a second user (a job's
#                 submitter other than the cluster's user)
# and env.sh, which exports GOFL_TEST_KDC_* for them.
#
# Needs krb5-kdc, krb5-admin-server (kadmin.local) and krb5-user (kinit,
# klist); with-kdc.sh installs them.
set -euo pipefail
dir="${1:?usage: run.sh DIR}"
realm="${KDC_REALM:-GOFL.TEST}"
port="${KDC_PORT:-88}"
user="${KDC_USER:-gofl}"
other="${KDC_OTHER_USER:-gofl-other}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

PATH="$PATH:/usr/sbin:/sbin"
for tool in krb5kdc kdb5_util kadmin.local; do
  command -v "$tool" >/dev/null 2>&1 || { echo "kdc: $tool not found (apt-get install krb5-kdc krb5-admin-server krb5-user)" >&2; exit 2; }
done

cat >"$dir/krb5.conf" <<CONF
[libdefaults]
  default_realm = $realm
  dns_lookup_kdc = false
  dns_lookup_realm = false
  dns_canonicalize_hostname = false
  rdns = false
  ignore_acceptor_hostname = true
  udp_preference_limit = 1
  ticket_lifetime = 24h
  renew_lifetime = 7d
  forwardable = true
  default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
  default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
  permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96

[realms]
  $realm = {
    kdc = 127.0.0.1:$port
  }

[domain_realm]
  localhost = $realm
  127.0.0.1 = $realm
CONF

cat >"$dir/kdc.conf" <<CONF
[kdcdefaults]
  kdc_ports = $port
  kdc_tcp_ports = $port

[realms]
  $realm = {
    database_name = $dir/principal
    key_stash_file = $dir/stash
    acl_file = $dir/kadm5.acl
    max_life = 24h
    max_renewable_life = 7d
    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  }

[logging]
  kdc = FILE:$dir/kdc.log
CONF
: >"$dir/kadm5.acl"

export KRB5_CONFIG="$dir/krb5.conf" KRB5_KDC_PROFILE="$dir/kdc.conf"
if [[ ! -f "$dir/principal" ]]; then
  kdb5_util create -s -r "$realm" -P "gofl-test-master-$RANDOM$RANDOM" >/dev/null
  kadm() { kadmin.local -r "$realm" -q "$1" >/dev/null; }
  kadm "addprinc -randkey hdfs/localhost@$realm"
  kadm "addprinc -randkey HTTP/localhost@$realm"
  kadm "ktadd -k $dir/hdfs.keytab hdfs/localhost@$realm HTTP/localhost@$realm"
  # The wrong keytab holds the user's first key; changing the key after
  # makes it stale, as a keytab left over from before a password change.
  kadm "addprinc -pw gofl-test-old-$RANDOM$RANDOM $user@$realm"
  kadm "ktadd -k $dir/wrong.keytab -norandkey $user@$realm"
  kadm "cpw -randkey $user@$realm"
  kadm "ktadd -k $dir/user.keytab -norandkey $user@$realm"
  kadm "addprinc -randkey $other@$realm"
  kadm "ktadd -k $dir/other.keytab $other@$realm"
  chmod 0600 "$dir"/*.keytab
fi

cat >"$dir/env.sh" <<ENV
export GOFL_TEST_KDC_DIR='$dir'
export GOFL_TEST_KDC_KRB5_CONF='$dir/krb5.conf'
export GOFL_TEST_KDC_REALM='$realm'
export GOFL_TEST_KDC_ADDRESS='127.0.0.1:$port'
export GOFL_TEST_KDC_USER_PRINCIPAL='$user@$realm'
export GOFL_TEST_KDC_USER_KEYTAB='$dir/user.keytab'
export GOFL_TEST_KDC_WRONG_KEYTAB='$dir/wrong.keytab'
export GOFL_TEST_KDC_OTHER_PRINCIPAL='$other@$realm'
export GOFL_TEST_KDC_OTHER_KEYTAB='$dir/other.keytab'
export GOFL_TEST_KDC_SERVICE_KEYTAB='$dir/hdfs.keytab'
export GOFL_TEST_KDC_SERVICE_PRINCIPAL='hdfs/localhost@$realm'
export GOFL_TEST_KDC_HTTP_PRINCIPAL='HTTP/localhost@$realm'
ENV

krb5kdc -n -r "$realm" -P "$dir/krb5kdc.pid" &
kdc=$!
trap 'kill -TERM $kdc 2>/dev/null; wait $kdc' TERM INT EXIT
# Ready once the user's keytab gets a ticket.
for _ in $(seq 1 120); do
  if KRB5CCNAME="FILE:$dir/probe.ccache" kinit -k -t "$dir/user.keytab" "$user@$realm" 2>/dev/null; then
    rm -f "$dir/probe.ccache"
    echo "KDC READY realm=$realm kdc=127.0.0.1:$port dir=$dir"
    wait $kdc
    exit $?
  fi
  kill -0 $kdc 2>/dev/null || { wait $kdc; exit $?; }
  sleep 0.25
done
echo "kdc: krb5kdc did not issue a ticket in 30s" >&2
exit 1
