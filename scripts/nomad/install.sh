#!/usr/bin/env bash
# install.sh: prints the path of a real Nomad v1.6.1 binary for the tests,
# unpacking it first (once) from $NOMAD_THIRD_PARTY (default
# ../shared/third_party/nomad-v1.6.1 next to the repository) into
# $NOMAD_INSTALL_DIR (default .tools/nomad-v1.6.1, git-ignored). The archive
# and the unpacked binary are checked against SHA256SUMS; if the binary is
# unusable (bad sum, does not run) it is built from src.tar.gz there
# (about 10-20 minutes on 2 cores). Exit status 1: no usable Nomad.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
src="${NOMAD_THIRD_PARTY:-}"
if [[ -z "$src" ]]; then
  for d in "$root/../shared/third_party/nomad-v1.6.1" "$root/../../shared/third_party/nomad-v1.6.1" /work/shared/third_party/nomad-v1.6.1; do
    if [[ -f "$d/SHA256SUMS" ]]; then src="$(cd "$d" && pwd)"; break; fi
  done
fi
dest="${NOMAD_INSTALL_DIR:-$root/.tools/nomad-v1.6.1}"
bin="$dest/nomad"
if [[ -z "$src" || ! -f "$src/SHA256SUMS" ]]; then
  echo "nomad: no third_party/nomad-v1.6.1 with SHA256SUMS found (set NOMAD_THIRD_PARTY)" >&2
  exit 1
fi
want_bin="$(awk '$2 == "nomad" {print $1}' "$src/SHA256SUMS")"
want_xz="$(awk '$2 == "nomad-linux-amd64.xz" {print $1}' "$src/SHA256SUMS")"
want_src="$(awk '$2 == "src.tar.gz" {print $1}' "$src/SHA256SUMS")"
sum() { sha256sum "$1" | awk '{print $1}'; }
usable() { [[ -x "$1" ]] && [[ "$(sum "$1")" == "${2:-$want_bin}" ]] && "$1" version 2>/dev/null | grep -q 'Nomad v1.6.1'; }

# A binary built from source here has its own sum, recorded beside it.
if usable "$bin" || { [[ -f "$bin.sha256" ]] && usable "$bin" "$(cat "$bin.sha256")"; }; then echo "$bin"; exit 0; fi
mkdir -p "$dest"
tmp="$(mktemp "$dest/nomad.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
if [[ -f "$src/nomad-linux-amd64.xz" && "$(sum "$src/nomad-linux-amd64.xz")" == "$want_xz" ]] &&
  xz -dc "$src/nomad-linux-amd64.xz" >"$tmp" && chmod +x "$tmp" && usable "$tmp"; then
  mv "$tmp" "$bin"
  echo "nomad: unpacked $bin (sha256 $want_bin)" >&2
  echo "$bin"
  exit 0
fi
echo "nomad: the packaged binary is missing, corrupt or does not run; building v1.6.1 from source" >&2
if [[ "$(sum "$src/src.tar.gz")" != "$want_src" ]]; then
  echo "nomad: $src/src.tar.gz does not match SHA256SUMS" >&2
  exit 1
fi
build="$(mktemp -d)"
tar -xzf "$src/src.tar.gz" -C "$build"
top="$build"
[[ -f "$top/go.mod" ]] || top="$(dirname "$(find "$build" -maxdepth 2 -name go.mod | head -n1)")"
(cd "$top" && go build -o "$tmp" .) >&2
rm -rf "$build"
if ! "$tmp" version 2>/dev/null | grep -q 'Nomad v1.6.1'; then
  echo "nomad: the binary built from source does not run" >&2
  exit 1
fi
sum "$tmp" >"$bin.sha256"
mv "$tmp" "$bin"
echo "nomad: built $bin from source" >&2
echo "$bin"
