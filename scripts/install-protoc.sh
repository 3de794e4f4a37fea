#!/usr/bin/env bash
# Installs protoc from Debian's protobuf-compiler when it is missing; the Go
# plugins are pinned in the Makefile. Used by `make proto`.
set -euo pipefail
if command -v protoc >/dev/null; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "protoc is missing; install Debian's protobuf-compiler (needs root)" >&2
  exit 1
fi
apt-get update -qq
apt-get install -y -qq protobuf-compiler
