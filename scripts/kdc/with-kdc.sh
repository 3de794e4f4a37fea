#!/usr/bin/env bash
# with-kdc.sh CMD [ARGS...]: runs CMD with an MIT Kerberos KDC (run.sh) for
# a fresh realm GOFL.TEST on a free port, started in the background and
# stopped (its directory removed) when CMD ends, whatever way it ends. CMD
# sees GOFL_TEST_KDC_* (krb5.conf, realm, keytabs and principals; see
# run.sh) and returns its status. If GOFL_TEST_KDC_KRB5_CONF is already set,
# CMD runs against that KDC.
#
# Missing krb5kdc: CI=true installs krb5-kdc, krb5-admin-server and
# krb5-user with apt-get (as root). Under CI=true a KDC that does not come
# up is an error; elsewhere a warning, and the Kerberos tests skip.
#
# Environment: KDC_START_TIMEOUT (seconds, default 60), KDC_REALM.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
svc_name=kdc svc_skips="the Kerberos tests"
# shellcheck source=../lib/service.sh
. "$here/../lib/service.sh"
PATH="$PATH:/usr/sbin:/sbin"

have_krb() { command -v krb5kdc >/dev/null 2>&1 && command -v kadmin.local >/dev/null 2>&1 && command -v kinit >/dev/null 2>&1; }
ready() { grep -q 'KDC READY' "$dir/run.log" 2>/dev/null; }

if [[ -n "${GOFL_TEST_KDC_KRB5_CONF:-}" ]]; then
  echo "kdc: GOFL_TEST_KDC_KRB5_CONF=$GOFL_TEST_KDC_KRB5_CONF is set; using it" >&2
else
  if ! have_krb && [[ "$svc_ci" == "true" ]] && command -v apt-get >/dev/null 2>&1 && [[ $(id -u) == 0 ]]; then
    echo "kdc: installing krb5-kdc, krb5-admin-server and krb5-user with apt-get" >&2
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q krb5-kdc krb5-admin-server krb5-user; } >&2 ||
      echo "kdc: apt-get install failed" >&2
  fi
  if ! have_krb; then
    svc_fail_or_warn "krb5kdc, kadmin.local and kinit are needed (Debian: krb5-kdc krb5-admin-server krb5-user)"
  else
    dir="$(mktemp -d -t gofl-kdc.XXXXXX)"
    rc=1
    for _ in 1 2 3; do
      port="$(svc_free_port)" || break
      echo "kdc: starting krb5kdc for GOFL.TEST on 127.0.0.1:$port (dir: $dir)" >&2
      svc_start "${KDC_START_TIMEOUT:-60}" "$dir/run.log" ready env KDC_PORT="$port" "$here/run.sh" "$dir"; rc=$?
      [[ $rc == 1 ]] || break
      rm -rf "${dir:?}"/*
    done
    trap 'svc_stop; rm -rf "$dir"' EXIT
    if [[ $rc == 0 ]]; then
      grep -o -m1 'KDC READY.*' "$dir/run.log" >&2
      # shellcheck source=/dev/null
      . "$dir/env.sh"
    else
      svc_fail_or_warn "the KDC did not start"
    fi
  fi
fi

"$@"
