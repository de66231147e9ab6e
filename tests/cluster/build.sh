#!/usr/bin/env bash
# Builds the gpufleet-cluster multi-call binary (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok, helm) and fetches the Gateway API
# standard CRDs, into ~/.cache/gpufleet/cluster/<key>/, key = hash of the module's
# sources. Prints the binary's path on stdout (logs go to stderr). Idempotent: when
# the key's directory is complete it returns at once.
#
#   bash tests/cluster/build.sh            # build or reuse, print the binary path
#   bash tests/cluster/build.sh --dir      # print the cache directory instead
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
gateway_api_version="v1.6.3"   # sigs.k8s.io/gateway-api; CRDs only, not linked in
cache_root="${GPUFLEET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet}/cluster"

key="$(
  cd "$here"
  {
    cat go.mod go.sum ./*.go build.sh
    echo "gateway-api=$gateway_api_version"
    go env GOVERSION GOOS GOARCH
  } | sha256sum | cut -c1-16
)"
out="$cache_root/$key"
bin="$out/gpufleet-cluster"
crds="$out/gateway-api-crds"

print_result() {
  if [[ "${1:-}" == "--dir" ]]; then echo "$out"; else echo "$bin"; fi
}

if [[ -x "$bin" && -f "$out/.complete" ]]; then
  print_result "${1:-}"
  exit 0
fi

mkdir -p "$out"
# One builder at a time per key: a second caller waits for the first and reuses its result.
exec 9>"$out/.lock"
flock 9
if [[ -x "$bin" && -f "$out/.complete" ]]; then
  print_result "${1:-}"
  exit 0
fi

# Stamp the versions the release builds would carry: clients (kubectl's skew check, helm's
# kubeVersion constraints) read them, and unstamped builds say v0.0.0-master.
mod_version() { sed -n "s#^[[:space:]]*$1 \(v[^ ]*\).*#\1#p" "$here/go.mod" | head -1; }
kube_version="$(mod_version k8s.io/kubernetes)"
helm_version="$(mod_version helm.sh/helm/v4)"
kube_minor="${kube_version#v1.}"
kube_minor="${kube_minor%%.*}"
ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube_minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

start=$(date +%s)
echo "Building gpufleet-cluster into $out (cold: ~20+ min on 2 cores)..." >&2
(
  cd "$here"
  CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$bin.tmp" .
)
mv -f "$bin.tmp" "$bin"
for c in etcd kube-apiserver kube-controller-manager kube-scheduler kwok helm; do
  ln -sf gpufleet-cluster "$out/$c"
done

# The CRDs come from the module cache of the pinned gateway-api release, never from a copy in git.
tmpmod="$(mktemp -d)"
trap 'rm -rf "$tmpmod"' EXIT
gw_dir="$(cd "$tmpmod" && GOWORK=off GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/gateway-api@$gateway_api_version" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [[ -z "$gw_dir" || ! -d "$gw_dir/config/crd/standard" ]]; then
  echo "Could not locate config/crd/standard of sigs.k8s.io/gateway-api@$gateway_api_version" >&2
  exit 1
fi
rm -rf "$crds"
mkdir -p "$crds"
cp "$gw_dir"/config/crd/standard/*.yaml "$crds/"
chmod u+w "$crds"/*.yaml

touch "$out/.complete"
# Each build is ~160 MB: drop those of other keys not rebuilt for a week.
find "$cache_root" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -mtime +7 -exec rm -rf {} + || true
echo "Built $bin in $(( $(date +%s) - start ))s" >&2
print_result "${1:-}"
