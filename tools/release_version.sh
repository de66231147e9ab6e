#!/usr/bin/env bash
# The version a release tag publishes, checked: the tag (v1.2.3) must name pyproject.toml's
# version, and charts/gpufleet/Chart.yaml's version and appVersion must equal it, so the
# image tag, the chart's default image tag (appVersion) and the chart all say one version.
# Prints the version; exits 1 naming the file that disagrees.
#
#   tools/release_version.sh v0.1.0 [checkout]
set -euo pipefail
tag="${1:?usage: release_version.sh <tag> [checkout]}"
root="${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/pyproject.toml" | head -1)"
chart="$(sed -n 's/^version: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/gpufleet/Chart.yaml")"
app="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/gpufleet/Chart.yaml")"
fail() { echo "release_version: $*" >&2; exit 1; }
[[ -n "$version" ]] || fail "pyproject.toml has no version"
[[ "$tag" == "v$version" ]] || fail "tag $tag is not v$version, pyproject.toml's version"
[[ "$chart" == "$version" ]] || fail "Chart.yaml version $chart is not $version"
[[ "$app" == "$version" ]] || fail "Chart.yaml appVersion $app is not $version"
echo "$version"
