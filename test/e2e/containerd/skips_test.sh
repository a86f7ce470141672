#!/usr/bin/env bash
# skips_test.sh: checks skips.sh on sample `go test -v` output; needs no
# containerd, so .ci/run runs it in every stage.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=skips.sh
source "$here/skips.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
expect() { # expect STATUS NAME LOG ALLOWLIST...
	local want=$1 name=$2 got=0
	shift 2
	check_skips "$@" >"$tmp/out" 2>&1 || got=$?
	if { [ "$want" = pass ] && [ $got != 0 ]; } || { [ "$want" = fail ] && [ $got = 0 ]; }; then
		echo "FAIL: $name: want $want, check_skips returned $got:"; cat "$tmp/out"
		failed=1
	else
		echo "ok: $name"
	fi
}

cat >"$tmp/allowed" <<'LIST'
# comment
TestConformance/external/ContainerEvents no GetContainerEvents

TestConformance/external/RestartAdoption the suite does not own containerd
LIST
cat >"$tmp/expected.log" <<'LOG'
=== RUN   TestConformance
=== RUN   TestConformance/external/ContainerEvents
    suite_test.go:672: runtime has no container events: unimplemented
=== RUN   TestConformance/external/RestartAdoption
    suite_test.go:68: backend external does not support it
--- PASS: TestConformance (12.00s)
    --- PASS: TestConformance/external (12.00s)
        --- PASS: TestConformance/external/VersionAndStatus (0.01s)
        --- SKIP: TestConformance/external/ContainerEvents (0.10s)
        --- SKIP: TestConformance/external/RestartAdoption (0.00s)
PASS
LOG
expect pass "the allowed skips" "$tmp/expected.log" "$tmp/allowed"
expect pass "no skip at all" /dev/null "$tmp/allowed"

sed 's/--- PASS: TestConformance\/external\/VersionAndStatus/--- SKIP: TestConformance\/external\/VersionAndStatus/' "$tmp/expected.log" >"$tmp/extra.log"
expect fail "a skip not in the list" "$tmp/extra.log" "$tmp/allowed"

cat >"$tmp/backend.log" <<'LOG'
--- PASS: TestConformance (0.00s)
    --- SKIP: TestConformance/external (0.00s)
LOG
expect fail "the external backend skipped (no endpoint)" "$tmp/backend.log" "$tmp/allowed"

cat >"$tmp/pods.log" <<'LOG'
=== RUN   TestPodStartsAndRuns
    helpers_test.go:56: JETLET_CRI_ENDPOINT is not set
--- SKIP: TestPodStartsAndRuns (0.00s)
LOG
expect fail "a pod scenario skipped" "$tmp/pods.log" "$tmp/allowed"

cat >"$tmp/prefix.log" <<'LOG'
        --- SKIP: TestConformance/external/ContainerEventsMore (0.00s)
LOG
expect fail "a name that only starts like an allowed one" "$tmp/prefix.log" "$tmp/allowed"

printf 'TestConformance/external/ContainerEvents\n' >"$tmp/noreason"
expect fail "an entry without a reason" "$tmp/expected.log" "$tmp/noreason"

expect pass "the debian flavour's allow-lists admit its skips" "$tmp/expected.log" "$here/skips.allowed" "$here/skips-debian.allowed"
expect fail "the v2 flavour must run ContainerEvents" "$tmp/expected.log" "$here/skips.allowed"

cat >"$tmp/one-flavour" <<'LIST'
TestConformance/external/ContainerEvents one flavour only
LIST
grep -v ContainerEvents "$tmp/allowed" >"$tmp/common"
expect pass "a skip allowed by the second list" "$tmp/expected.log" "$tmp/common" "$tmp/one-flavour"
expect fail "a malformed second list" "$tmp/expected.log" "$tmp/common" "$tmp/noreason"

exit $failed
