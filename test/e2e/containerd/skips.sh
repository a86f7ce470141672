# skips.sh: sourced by run.sh. check_skips fails when a `go test -v` log
# holds a skipped test that the allow-list does not name.

# allowed_skips ALLOWLIST prints the names the allow-list admits; it fails
# when an entry has no reason.
allowed_skips() {
	local name reason bad=0
	while read -r name reason; do
		case $name in '' | '#'*) continue ;; esac
		if [ -z "$reason" ]; then
			echo "== FAIL: $1: $name has no reason" >&2
			bad=1
		fi
		echo "$name"
	done <"$1"
	return $bad
}

# skipped_tests LOG prints the name of every test the log says was skipped.
skipped_tests() {
	sed -nE 's/^[[:space:]]*--- SKIP: ([^ ]+) \(.*/\1/p' "$1"
}

# check_skips LOG ALLOWLIST... prints every skip of LOG, and fails when one
# is in none of the allow-lists (or one is malformed).
check_skips() {
	local log=$1 list name bad=0 by
	shift
	for list in "$@"; do
		allowed_skips "$list" >/dev/null || return 1
	done
	while read -r name; do
		[ -n "$name" ] || continue
		by=
		for list in "$@"; do
			if grep -qxF -- "$name" <<<"$(allowed_skips "$list")"; then
				by=$(basename "$list")
				break
			fi
		done
		if [ -n "$by" ]; then
			echo "   skipped, allowed by $by: $name"
		else
			echo "== FAIL: $name was skipped and none of $* allows it"
			grep -A2 -F -- "--- SKIP: $name " "$log" || true
			bad=1
		fi
	done <<<"$(skipped_tests "$log")"
	return $bad
}
