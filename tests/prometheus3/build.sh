#!/usr/bin/env bash
# Builds Prometheus 3 (github.com/prometheus/prometheus, cmd/prometheus, at the version
# go.mod pins) into ~/.cache/gpufleet/prometheus3/<key>/prometheus, key = hash of this
# module's files and the Go toolchain. The tests run the adapter and the closed loop on
# it beside Debian's Prometheus 2. Prints the binary's path on stdout (logs go to
# stderr). Idempotent: when the key's binary is complete it returns at once.
#
#   bash tests/prometheus3/build.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${GPUFLEET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet}/prometheus3"

key="$(
  cd "$here"
  {
    cat go.mod go.sum tools.go build.sh
    go env GOVERSION GOOS GOARCH
  } | sha256sum | cut -c1-16
)"
out="$cache_root/$key"
bin="$out/prometheus"

if [[ -x "$bin" && -f "$out/.complete" ]]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if [[ -x "$bin" && -f "$out/.complete" ]]; then
  echo "$bin"
  exit 0
fi

version="$(sed -n 's#^\(require\)\{0,1\}[[:space:]]*github.com/prometheus/prometheus \(v[^ ]*\).*#\2#p' "$here/go.mod" | head -1)"
# Module v0.3XX.Y is Prometheus 3.XX.Y; stamp it so `prometheus --version` and the
# build_info metric say what runs.
release="${version#v0.}"
release="3.$((10#${release%%.*} - 300)).${release#*.}"
ldflags="-s -w"
for var in Version=$release Branch=release Revision=module BuildUser=gpufleet BuildDate=19700101-00:00:00; do
  ldflags+=" -X github.com/prometheus/common/version.$var"
done

start=$(date +%s)
echo "Building Prometheus $release into $out (cold: ~10 min on 2 cores)..." >&2
(
  cd "$here"
  CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$bin.tmp" \
    github.com/prometheus/prometheus/cmd/prometheus
)
mv -f "$bin.tmp" "$bin"
"$bin" --version >&2
touch "$out/.complete"
echo "Built in $(( $(date +%s) - start )) s" >&2
echo "$bin"
