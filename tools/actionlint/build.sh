#!/usr/bin/env bash
# Builds actionlint from the Go module pinned in go.mod/go.sum into
# ~/.cache/gpufleet/actionlint/<key>/actionlint, key = hash of those files, this script and
# the Go version; prints the binary's path. Returns at once when that build exists.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${GPUFLEET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet}/actionlint"
key="$(
  cd "$here"
  { cat go.mod go.sum build.sh; go env GOVERSION GOOS GOARCH; } | sha256sum | cut -c1-16
)"
out="$cache_root/$key"
bin="$out/actionlint"
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [[ ! -x "$bin" ]]; then
  echo "Building actionlint into $out..." >&2
  (cd "$here" && go build -trimpath -ldflags "-s -w" -o "$bin.partial" github.com/rhysd/actionlint/cmd/actionlint)
  mv "$bin.partial" "$bin"
fi
echo "$bin"
