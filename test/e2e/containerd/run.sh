#!/usr/bin/env bash
# run.sh: jetlet's containerd stage, once per flavour of containerd
# (setup.sh): debian (Debian 12's containerd 1.6) and v2 (containerd 2
# built from the Go module proxy), one after the other. For each it starts a
# private containerd (setup.sh), runs the CRI conformance suite against it
# through jetlet's client, then the pod scenarios in test/e2e/containerd and
# the escape suite (test/escapes), and always
# tears containerd down again (trap EXIT), whether the tests pass or not.
#
# A flavour fails when a suite fails, when a test is skipped that neither
# skips.allowed nor skips-<flavour>.allowed names (the external backend with
# no endpoint, any pod scenario but the event stream's on debian), or when
# no test passed: a green flavour must mean its containerd ran. The stage
# runs every flavour and fails when any failed.
#
# JETLET_CONTAINERD_FLAVOURS picks the flavours ("debian v2");
# JETLET_CONTAINERD_FLAVOUR runs that one alone.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=skips.sh
source "$here/skips.sh"
repo=$(cd "$here/../../.." && pwd)
cd "$repo"
export PATH=/usr/local/go/bin:$PATH
WORK=${JETLET_CONTAINERD_DIR:-/tmp/jetlet-containerd}
export JETLET_CONTAINERD_DIR=$WORK
TEST_TIMEOUT=${JETLET_E2E_TEST_TIMEOUT:-6m}

stage_start=$SECONDS
if [ -z "${JETLET_CONTAINERD_FLAVOUR:-}" ]; then
	failed=
	for flavour in ${JETLET_CONTAINERD_FLAVOURS:-debian v2}; do
		echo "== containerd stage: flavour $flavour"
		JETLET_CONTAINERD_FLAVOUR=$flavour bash "$here/run.sh" || failed="$failed $flavour"
	done
	if [ -n "$failed" ]; then
		echo "== containerd stage: FAILED on:$failed ($((SECONDS - stage_start))s)"
		exit 1
	fi
	echo "== containerd stage: passed on ${JETLET_CONTAINERD_FLAVOURS:-debian v2} ($((SECONDS - stage_start))s)"
	exit 0
fi
flavour=$JETLET_CONTAINERD_FLAVOUR

teardown() {
	rc=$?
	if [ $rc != 0 ] && [ -f "$WORK/containerd.log" ]; then
		echo "== containerd stage [$flavour]: last lines of $WORK/containerd.log"
		tail -n 40 "$WORK/containerd.log"
	fi
	echo "== containerd stage [$flavour]: teardown"
	bash "$here/teardown.sh" || rc=1
	echo "== containerd stage [$flavour]: $((SECONDS - stage_start))s, exit $rc"
	exit $rc
}
trap teardown EXIT

echo "== containerd stage [$flavour]: setup"
t=$SECONDS
bash "$here/setup.sh"
echo "== containerd stage [$flavour]: setup took $((SECONDS - t))s"
# shellcheck source=/dev/null
source "$WORK/env.sh"
logs=$WORK/logs/$flavour
mkdir -p "$logs"
allowed=("$here/skips.allowed")
if [ -f "$here/skips-$flavour.allowed" ]; then
	allowed+=("$here/skips-$flavour.allowed")
fi

# gotest NAME PKGS... -- runs go test -v, keeps its output in $logs/NAME.log,
# prints the counts of PASS/FAIL/SKIP lines, and fails on a test failure.
gotest() {
	local name=$1
	shift
	local out=$logs/$name.log t=$SECONDS rc=0
	go test -race -count=1 -v -timeout "$TEST_TIMEOUT" "$@" 2>&1 | tee "$out" || rc=$?
	local pass fail skip
	pass=$(grep -c -- '--- PASS' "$out" || true)
	fail=$(grep -c -- '--- FAIL' "$out" || true)
	skip=$(grep -c -- '--- SKIP' "$out" || true)
	echo "== $name: $pass passed, $fail failed, $skip skipped (go test -v '---' lines, subtests included) in $((SECONDS - t))s"
	return $rc
}

# 1. The CRI conformance suite, external backend only: the embedded backend
# runs in `go test ./...` already.
echo "== containerd stage [$flavour]: CRI conformance suite against $JETLET_CRI_ENDPOINT ($JETLET_CRI_IMAGE)"
gotest cri-conformance -run '^TestConformance$/^external$' ./test/cri/
out=$logs/cri-conformance.log
check_skips "$out" "${allowed[@]}" || exit 1
if ! grep -q -- '--- PASS: TestConformance/external/' "$out"; then
	echo "== FAIL [$flavour]: no conformance test passed against containerd"
	exit 1
fi
cases() { grep -cE -- "--- $1: TestConformance/external/[^/ ]+ " "$out" || true; }
echo "== cri-conformance against containerd [$flavour]: suite tests $(cases PASS) passed, $(cases FAIL) failed, $(cases SKIP) skipped (each allowed above)"

# 2. Pod scenarios: jetlet run --runtime-endpoint against this containerd.
# ---- E2E POD SCENARIOS: Go tests in test/e2e/containerd, same env ----
# The tests live in test/e2e/containerd/pods (this directory holds pause.c,
# which go would refuse in a Go package). They skip without
# JETLET_CRI_ENDPOINT; here a skip skips.allowed does not name is a failure.
if compgen -G "$here/pods/*_test.go" >/dev/null; then
	echo "== containerd stage [$flavour]: pod scenarios (./test/e2e/containerd/...) through jetlet run --runtime-endpoint $JETLET_CRI_ENDPOINT"
	gotest pod-scenarios ./test/e2e/containerd/...
	out=$logs/pod-scenarios.log
	scenarios() { grep -cE -- "--- $1: Test[^/ ]+ " "$out" || true; }
	echo "== pod-scenarios against containerd [$flavour]: scenarios $(scenarios PASS) passed, $(scenarios FAIL) failed, $(scenarios SKIP) skipped"
	check_skips "$out" "${allowed[@]}" || exit 1
	if [ "$(scenarios PASS)" = 0 ]; then
		echo "== FAIL [$flavour]: no pod scenario passed"
		exit 1
	fi
	# Opt-in: pod start latency, jetlet vs bare CRI (about 30s).
	if [ "${JETLET_E2E_BENCH:-}" = 1 ]; then
		echo "== containerd stage [$flavour]: BenchmarkPodStart"
		go test -count=1 -run '^$' -bench PodStart -benchtime 1x ./test/e2e/containerd/... 2>&1 | tee "$logs/bench-pod-start.log"
	fi
else
	echo "== containerd stage [$flavour]: no pod scenarios yet (no *_test.go in test/e2e/containerd/pods)"
fi
# ---- end of pod scenarios ----

# 3. The escape suite (test/escapes) against this containerd, through
# jetlet run --runtime-endpoint: every row, its pods at the default level
# on the stage's pod network (setup.sh), its tool image imported with ctr;
# a row that cannot apply skips, and skips.allowed says why.
echo "== containerd stage [$flavour]: escape suite (./test/escapes) against $JETLET_CRI_ENDPOINT"
gotest escapes ./test/escapes/
out=$logs/escapes.log
check_skips "$out" "${allowed[@]}" || exit 1
if ! grep -qE -- '--- (PASS|FAIL): Test' "$out"; then
	echo "== FAIL [$flavour]: no escape row ran against containerd"
	exit 1
fi
