#!/usr/bin/env bash
# build.sh: builds critest (sigs.k8s.io/cri-tools' validation suite, as a
# test binary) once per machine and version into the cache
# (JETLET_CRITEST_CACHE, default /var/cache/jetlet-ci: cri-tools-<version>/critest,
# named critest wherever it is copied), and beside it ginkgo: the CLI at
# the version cri-tools requires, which `critest -parallel N` runs from its
# PATH to run the specs on N nodes. It prints both paths, critest's first.
# The critest stage (run.sh) and the guest stage (test/vm) run them.
set -euo pipefail
export PATH=/usr/local/go/bin:$PATH
CRITEST_VERSION=v1.37.0
cache=${JETLET_CRITEST_CACHE:-/var/cache/jetlet-ci}
critest=$cache/cri-tools-$CRITEST_VERSION/critest
ginkgo=$(dirname "$critest")/ginkgo
if [ ! -x "$critest" ] || [ ! -x "$ginkgo" ]; then
	echo "== building critest $CRITEST_VERSION and its ginkgo (cached as $critest, $ginkgo)" >&2
	mkdir -p "$(dirname "$critest")"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	src=$(cd "$tmp" && go mod download -json "sigs.k8s.io/cri-tools@$CRITEST_VERSION" | sed -nE 's/^\t"Dir": "(.*)",$/\1/p')
	(cd "$src" && go test -c -o "$critest.tmp" ./cmd/critest && go build -o "$ginkgo.tmp" github.com/onsi/ginkgo/v2/ginkgo)
	mv "$ginkgo.tmp" "$ginkgo"
	mv "$critest.tmp" "$critest"
fi
echo "$critest $ginkgo"
