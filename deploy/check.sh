#!/usr/bin/env bash
# deploy/check.sh: CI's check of deploy/ (Debian 12, as root; installs what
# it needs with apt):
#   - the systemd units pass `systemd-analyze verify`, with their ExecStart
#     paths pointed at the jetlet and nats-server just built;
#   - every variable of jetlet.env is a flag of `jetlet run`;
#   - nats-server accepts nats-server.conf with its two included files: the
#     routes from routes.conf.example and jetlet's authorization block
#     (`jetlet nats-config`). The chaos tests (test/chaos) start their
#     cluster from the same file;
#   - deploy/local.sh stands the guide's fleet up on this machine, adds a
#     node with nats-config and a reload (SIGHUP) of every server, and
#     takes it down;
#   - containerd accepts config.toml, whose registry config_path names
#     certs.d, whose _default/hosts.toml sends pulls to jetlet run's
#     loopback registry first; the CNI conflist is JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

log() { printf '== deploy: %s\n' "$*"; }
die() { printf '== deploy: FAILED: %s\n' "$*" >&2; exit 1; }

missing=
command -v systemd-analyze >/dev/null || missing="$missing systemd"
command -v containerd >/dev/null || missing="$missing containerd"
command -v python3 >/dev/null || missing="$missing python3"
if [ -n "$missing" ]; then
	[ "$(id -u)" = 0 ] || die "needs$missing (apt-get install as root)"
	log "apt-get install$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get -qq -o DPkg::Lock::Timeout=300 update
	# shellcheck disable=SC2086
	apt-get -qq -y -o DPkg::Lock::Timeout=300 --no-install-recommends install $missing >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/units" "$work/nats"
log "building jetlet and nats-server (go.mod's version)"
go build -o "$work/bin/jetlet" ./cmd/jetlet
go build -o "$work/bin/nats-server" github.com/nats-io/nats-server/v2

log "systemd-analyze verify"
for unit in deploy/systemd/*.service; do
	sed "s#/usr/local/bin/#$work/bin/#g" "$unit" >"$work/units/${unit##*/}"
done
systemd-analyze verify "$work"/units/*.service

log "jetlet.env names flags of jetlet run"
flags=$("$work/bin/jetlet" run --help)
while IFS= read -r line; do
	case $line in '' | '#'*) continue ;; esac
	var=${line%%=*}
	grep -q "\[$var\]" <<<"$flags" || die "jetlet.env: $var is not a flag of jetlet run"
done <deploy/systemd/jetlet.env

log "nats-server -t"
cp deploy/nats/nats-server.conf "$work/nats/"
sed 's/ROUTE_PASSWORD/check-password/g' deploy/nats/routes.conf.example >"$work/nats/routes.conf"
if "$work/bin/jetlet" nats-config --help >/dev/null 2>&1; then
	"$work/bin/jetlet" nats-config --nodes node1,node2,node3 --keys-dir "$work/keys" >"$work/nats/jetlet-auth.conf"
else
	log "jetlet has no nats-config yet: a stand-in authorization block"
	printf 'authorization { users: [ {user: jetlet, password: stand-in} ] }\n' >"$work/nats/jetlet-auth.conf"
fi
NATS_SERVER_NAME=check "$work/bin/nats-server" -t -c "$work/nats/nats-server.conf"

log "the guide on one machine (deploy/local.sh): three servers, two nodes, a third added by a reload"
fleet="$work/fleet"
PATH="$work/bin:$PATH" bash deploy/local.sh up "$fleet" node1 node2 >/dev/null
trap 'PATH="$work/bin:$PATH" bash deploy/local.sh down "$fleet" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
PATH="$work/bin:$PATH" bash deploy/local.sh add-node "$fleet" node3 >/dev/null
eval "$(bash deploy/local.sh env "$fleet" auditor)"
"$work/bin/jetlet" get nodes | grep -Eq '^node3 +Ready' || die "node3 is not Ready after the reload that admitted it"
PATH="$work/bin:$PATH" bash deploy/local.sh down "$fleet" >/dev/null

log "containerd config dump"
containerd --config deploy/containerd/config.toml config dump >/dev/null
python3 -m json.tool deploy/containerd/10-jetlet.conflist >/dev/null
log "hosts.toml: pulls try the loopback registry of jetlet run first"
"$work/bin/jetlet" run --help | grep -q -- '--image-registry-listen string.*(default "127.0.0.1:5050")' ||
	die "jetlet run has no --image-registry-listen defaulting to 127.0.0.1:5050"
python3 - deploy/containerd/certs.d/_default/hosts.toml <<'PY' || die "certs.d/_default/hosts.toml"
import sys, tomllib
hosts = tomllib.load(open(sys.argv[1], "rb"))["host"]
assert hosts["http://127.0.0.1:5050"]["capabilities"] == ["pull", "resolve"], hosts
PY
containerd --config deploy/containerd/config.toml config dump | grep -q 'config_path = "/etc/containerd/certs.d"' ||
	die "config.toml: the CRI registry's config_path is not /etc/containerd/certs.d"

log "ok"
