#!/usr/bin/env bash
# run.sh: the critest stage. Runs the upstream CRI validation suite (critest
# from sigs.k8s.io/cri-tools, built as a test binary and cached) against the
# embedded runtime of `jetlet run`, inside namespaces of their own
# (sandbox.sh), with every image critest pulls built from the host's
# busybox-static and served by a registry the stage starts there
# (test/testimages; nothing is pulled from outside), and fails when
#   - a spec that test/critest/skips.txt does not list fails or skips itself,
#     or an entry of skips.txt names no spec (test/critest/skipcheck);
#   - the run changed the host it ran on: host name, mode of /, SysV IPC,
#     mounts (compared in the namespaces), or the real root's mode, which is
#     restored whatever happens. Cgroups are compared and shown, not failed
#     on: the cgroup tree is the machine's.
# Root only. docs/embedded-runtime.md, "Conformance", says how to run it by
# hand. Environment:
#   JETLET_CRITEST_CACHE   where critest binaries are kept (/var/cache/jetlet-ci)
#   JETLET_CRITEST_JETLET  a jetlet binary to test instead of building this tree
#                          (with the jetlet-shim beside it, if there is one)
#   JETLET_CRITEST_RUN_ARGS more flags for `jetlet run`
#   JETLET_CRITEST_ALL=1   skip nothing; a listed spec that passes fails the stage
#   JETLET_CRITEST_FOCUS   a -ginkgo.focus expression (a partial run)
#   JETLET_CRITEST_LOGS    where the logs and reports are left (/tmp/jetlet-critest-logs)
#   JETLET_CRITEST_TIMEOUT the run's limit (15m)
#   JETLET_CRITEST_PARALLEL the specs run on this many ginkgo nodes at once (4;
#                          1 runs them one at a time, in critest's process)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
export PATH=/usr/local/go/bin:$PATH
logs=${JETLET_CRITEST_LOGS:-/tmp/jetlet-critest-logs}
limit=${JETLET_CRITEST_TIMEOUT:-15m}

if [ "$(id -u)" != 0 ]; then
	echo "== FAIL: the critest stage needs root (namespaces, and a runtime that isolates as root)"
	exit 1
fi
stage_start=$SECONDS
# busybox-static: every image critest pulls is built from it
# (test/testimages); the CNI plugins give its pods a network.
if [ ! -x /bin/busybox ] || [ ! -x /usr/lib/cni/bridge ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get -qq -o DPkg::Lock::Timeout=300 update
	apt-get -qq -y -o DPkg::Lock::Timeout=300 --no-install-recommends install busybox-static containernetworking-plugins >/dev/null
fi
# Short: the runtime's socket lives in it (107 bytes at most).
WORK=$(mktemp -d /tmp/jetlet-critest.XXXXXX)
# Containers that run as another user must reach their dirs in the data dir.
chmod 0755 "$WORK"
mkdir -p "$WORK/bin" "$WORK/out" "$WORK/root"
root_mode=$(stat -c %a /)
finish() {
	rc=$?
	now=$(stat -c %a /)
	if [ "$now" != "$root_mode" ]; then
		echo "!!!!!! THE RUN CHANGED THE MODE OF THE REAL / FROM $root_mode TO $now: RESTORED TO $root_mode !!!!!!"
		chmod "$root_mode" /
		rc=1
	fi
	rm -rf "$logs"
	mv "$WORK/out" "$logs" 2>/dev/null || true
	rm -rf "$WORK"
	echo "== critest stage: $((SECONDS - stage_start))s, exit $rc (logs and reports in $logs)"
	exit $rc
}
trap finish EXIT

# 1. critest, built once per machine and version (build.sh).
t=$SECONDS
read -r critest ginkgo <<<"$(bash "$here/build.sh")"
cp "$critest" "$WORK/bin/critest"
mkdir -p "$WORK/critest-path" # critest's PATH (sandbox.sh)
cp "$ginkgo" "$WORK/critest-path/ginkgo"

# 2. jetlet (and jetlet-shim once there is one), the skip-file checker, and
# the test images' registry (test/testimages: every image critest pulls,
# built from the host's busybox-static).
if [ -n "${JETLET_CRITEST_JETLET:-}" ]; then
	cp "$JETLET_CRITEST_JETLET" "$WORK/bin/jetlet"
	shim=$(dirname "$JETLET_CRITEST_JETLET")/jetlet-shim
	if [ -x "$shim" ]; then
		cp "$shim" "$WORK/bin/jetlet-shim"
	fi
else
	go build -o "$WORK/bin/jetlet" ./cmd/jetlet
	if [ -d cmd/jetlet-shim ]; then
		go build -o "$WORK/bin/jetlet-shim" ./cmd/jetlet-shim
	fi
fi
go build -o "$WORK/bin/skipcheck" ./test/critest/skipcheck
go build -o "$WORK/bin/testimages" ./test/testimages/cmd/testimages
echo "== critest stage: binaries ready in $((SECONDS - t))s"

# 3. Which specs to skip: the skip file resolved against every spec of
# this critest (a dry run).
"$WORK/bin/critest" -ginkgo.dry-run -ginkgo.no-color -ginkgo.json-report "$WORK/out/specs.json" >/dev/null
check_args=(-skips "$here/skips.txt" -specs "$WORK/out/specs.json")
skip=$("$WORK/bin/skipcheck" plan "${check_args[@]}")
if [ "${JETLET_CRITEST_ALL:-}" = 1 ]; then
	skip='^$'
	check_args+=(-all)
fi
# critest mostly waits on the runtime: four nodes take the run from about
# 70 s to 25 s on a 2-core machine.
# (critest takes no -parallel 1: ginkgo reads it as go test's own.)
extra=()
if [ "${JETLET_CRITEST_PARALLEL:-4}" != 1 ]; then
	extra+=(-parallel "${JETLET_CRITEST_PARALLEL:-4}")
fi
if [ -n "${JETLET_CRITEST_FOCUS:-}" ]; then
	extra+=(-ginkgo.focus "$JETLET_CRITEST_FOCUS")
fi

# 4. The run, in namespaces of its own (--kill-child: when the limit kills
# unshare, its pid 1 dies, and every process of the run with it).
t=$SECONDS
rc=0
timeout --kill-after=30s "$limit" unshare --uts --ipc --mount --net --pid --fork --kill-child --mount-proc --propagation private \
	bash "$here/sandbox.sh" "$WORK" "$skip" "${extra[@]}" || rc=$?
echo "== critest stage: the run took $((SECONDS - t))s (exit $rc)"
if [ $rc != 0 ]; then
	echo "== FAIL: the run in namespaces failed (exit $rc; 124 is the $limit limit)"
	exit 1
fi

# 5. The host as the runtime saw it, before and after.
changed=0
for f in hostname root-mode sysv-ipc mounts; do
	if ! diff -u "$WORK/out/before/$f" "$WORK/out/after/$f" >"$WORK/out/diff-$f"; then
		echo "== FAIL: the run changed the host's $f:"
		cat "$WORK/out/diff-$f"
		changed=1
	fi
done
# cgroupfs is the machine's, not the namespaces': other jetlet tests on the
# same machine create and remove cgroups too, so a difference is shown, not
# failed on.
if ! diff -u "$WORK/out/before/cgroups" "$WORK/out/after/cgroups" >"$WORK/out/diff-cgroups"; then
	echo "== cgroups changed during the run (also by anything else on this machine; see $logs/diff-cgroups): $(grep -c '^+/' "$WORK/out/diff-cgroups") new, $(grep -c '^-/' "$WORK/out/diff-cgroups") gone"
fi
if [ -s "$WORK/out/leftover-processes" ]; then
	echo "== processes left running after jetlet stopped (killed with the namespace):"
	cat "$WORK/out/leftover-processes"
fi
if ! diff -u "$WORK/out/before/files" "$WORK/out/after/files" >"$WORK/out/diff-files"; then
	echo "== files the run wrote on the test host, kept off the real one by the overlay: $(grep -c '^+/' "$WORK/out/diff-files") (see $logs/diff-files)"
fi

# 6. The specs.
if [ -n "${JETLET_CRITEST_FOCUS:-}" ]; then
	echo "== JETLET_CRITEST_FOCUS is set: a partial run, the skip file is not checked"
	"$WORK/bin/skipcheck" check "${check_args[@]}" -report "$WORK/out/report.json" || true
	exit $changed
fi
"$WORK/bin/skipcheck" check "${check_args[@]}" -report "$WORK/out/report.json" || exit 1
exit $changed
