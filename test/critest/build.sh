#!/usr/bin/env bash
# build.sh: builds critest (sigs.k8s.io/cri-tools' validation suite, as a
# test binary) once per machine and version into the cache
# (JETLET_CRITEST_CACHE, default /var/cache/jetlet-ci: cri-tools-<version>/critest,
# named critest wherever it is copied) and prints its path.
# The critest stage (run.sh) and the guest stage (test/vm) run it.
set -euo pipefail
export PATH=/usr/local/go/bin:$PATH
CRITEST_VERSION=v1.37.0
cache=${JETLET_CRITEST_CACHE:-/var/cache/jetlet-ci}
critest=$cache/cri-tools-$CRITEST_VERSION/critest
if [ ! -x "$critest" ]; then
	echo "== building critest $CRITEST_VERSION (cached as $critest)" >&2
	mkdir -p "$(dirname "$critest")"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	src=$(cd "$tmp" && go mod download -json "sigs.k8s.io/cri-tools@$CRITEST_VERSION" | sed -nE 's/^\t"Dir": "(.*)",$/\1/p')
	(cd "$src" && go test -c -o "$critest.tmp" ./cmd/critest)
	mv "$critest.tmp" "$critest"
fi
echo "$critest"
