#!/usr/bin/env bash
# with-chromium.sh CMD [ARGS...]: runs CMD with GOFL_CHROMIUM naming a
# Chromium for the dashboard's browser tests (web/webtest). A Chromium
# already on PATH (chromium, chromium-browser) or named by GOFL_CHROMIUM is
# used; else, as root on Debian, the chromium package is installed with
# apt-get. The tests start it themselves (headless, --no-sandbox, a fresh
# profile, no background networking), so nothing runs between tests.
#
# Under CI=true a missing Chromium is an error; elsewhere it is a warning,
# and the browser tests skip. CMD's exit status is returned.
#
# Screenshots: set GOFL_TEST_ARTIFACTS=DIR to keep them (one directory per
# test); by default they go to the tests' temporary directories.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
svc_name=chromium svc_skips="the dashboard's browser tests"
# shellcheck source=../lib/service.sh
. "$here/../lib/service.sh"

find_chromium() {
  if [[ -n "${GOFL_CHROMIUM:-}" && -x "${GOFL_CHROMIUM}" ]]; then echo "$GOFL_CHROMIUM"; return 0; fi
  command -v chromium 2>/dev/null || command -v chromium-browser 2>/dev/null
}

path="$(find_chromium)"
if [[ -z "$path" ]] && command -v apt-get >/dev/null 2>&1 && [[ $(id -u) == 0 ]]; then
  echo "chromium: installing Debian's chromium with apt-get" >&2
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium ||
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }; } >&2 ||
    echo "chromium: apt-get install failed" >&2
  path="$(find_chromium)"
fi
if [[ -n "$path" ]]; then
  export GOFL_CHROMIUM="$path"
  echo "chromium: GOFL_CHROMIUM=$path ($("$path" --version 2>/dev/null | head -1))" >&2
else
  svc_fail_or_warn "no Chromium found or installed"
fi

"$@"
