#!/usr/bin/env bash
# deploy/local.sh: docs/deploy.md's fleet on one machine, to try the guide
# before three machines: three nats-servers started from deploy/nats/
# nats-server.conf (each on its own loopback ports and store, the routes of
# routes.conf.example pointed at them), the roles' keys and permissions of
# `jetlet nats-config`, and jetlet nodes on the embedded process runtime,
# each with its own key, as the guide sets them up.
#
#   deploy/local.sh up DIR [NODE...]     start it all under DIR (nodes: node1 node2)
#   deploy/local.sh add-node DIR NODE    the guide's "Adding a node": nats-config
#                                        again, a reload (SIGHUP) of every server,
#                                        then the node
#   deploy/local.sh env DIR [ROLE]       the variables a client command needs as
#                                        ROLE (scheduler, auditor, operator)
#   deploy/local.sh down DIR             delete the pods, stop the nodes and servers
#
# jetlet and nats-server come from PATH, else are built from this checkout
# (go.mod's nats-server). Ports: 14222-14224 for clients, 16222-16224 for
# routes, 18222-18224 for monitoring, 15050 and up for the nodes' registries
# of jetlet_images (LOCAL_PORT_OFFSET moves them all).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
offset=${LOCAL_PORT_OFFSET:-0}
servers=(1 2 3)

die() { printf 'local.sh: %s\n' "$*" >&2; exit 1; }
client_port() { echo $((14221 + $1 + offset)); }
route_port() { echo $((16221 + $1 + offset)); }
monitor_port() { echo $((18221 + $1 + offset)); }
urls() {
	local out=() i
	for i in "${servers[@]}"; do out+=("nats://127.0.0.1:$(client_port "$i")"); done
	(IFS=,; echo "${out[*]}")
}

# binaries finds jetlet and nats-server, building what PATH lacks into DIR/bin.
binaries() {
	mkdir -p "$dir/bin"
	jetlet=$(command -v jetlet || true)
	if [ -z "$jetlet" ]; then
		jetlet=$dir/bin/jetlet
		[ -x "$jetlet" ] || (cd "$repo" && go build -o "$dir/bin/" ./cmd/jetlet ./cmd/jetlet-shim)
	fi
	nats_server=$(command -v nats-server || true)
	if [ -z "$nats_server" ]; then
		nats_server=$dir/bin/nats-server
		[ -x "$nats_server" ] || (cd "$repo" && go build -o "$nats_server" github.com/nats-io/nats-server/v2)
	fi
}

# as runs a jetlet client command with role's key.
as() {
	local role=$1; shift
	local inbox=()
	[ "$role" = auditor ] && inbox=(--nats-inbox-prefix _INBOX_auditor)
	"$jetlet" "$@" --nats-url "$(urls)" --nats-nkey "$dir/keys/$role.nk" "${inbox[@]}"
}

# wait_for tries a command every half second for up to 60 s.
wait_for() {
	local what=$1; shift
	for _ in $(seq 120); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	die "$what: not within 60 s"
}

healthy() {
	local i
	for i in "${servers[@]}"; do
		python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=2)" \
			"http://127.0.0.1:$(monitor_port "$i")/healthz?js-enabled-only=true" || return 1
	done
}

# nodes_file lists the fleet's nodes, one per line, as nats-config knows them.
nodes_file() { echo "$dir/nodes"; }

write_auth() {
	"$jetlet" nats-config --nodes "$(paste -sd, "$(nodes_file)")" --keys-dir "$dir/keys" >"$dir/nats/jetlet-auth.conf.new"
	mv "$dir/nats/jetlet-auth.conf.new" "$dir/nats/jetlet-auth.conf"
}

start_server() {
	local i=$1 conf=$dir/nats/nats$1.conf
	sed -e "s#listen: 0.0.0.0:4222#listen: 127.0.0.1:$(client_port "$i")#" \
		-e "s#http: 127.0.0.1:8222#http: 127.0.0.1:$(monitor_port "$i")#" \
		-e "s#store_dir: /var/lib/nats/jetstream#store_dir: \"$dir/nats/store$i\"#" \
		-e "s#listen: 0.0.0.0:6222#listen: 127.0.0.1:$(route_port "$i")#" \
		"$repo/deploy/nats/nats-server.conf" >"$conf"
	local out
	out=$(NATS_SERVER_NAME=nats$i "$nats_server" -t -c "$conf" 2>&1) || die "nats-server refuses $conf: $out"
	NATS_SERVER_NAME=nats$i nohup "$nats_server" -c "$conf" -l "$dir/nats/nats$i.log" -P "$dir/nats/nats$i.pid" >/dev/null 2>&1 &
}

start_node() {
	local node=$1 n
	n=$(grep -nx "$node" "$(nodes_file)" | cut -d: -f1)
	mkdir -p "$dir/$node"
	# Each node's loopback registry of jetlet_images on a port of its own.
	nohup "$jetlet" run --node "$node" --data-dir "$dir/$node/data" --replicas 3 \
		--nats-url "$(urls)" --nats-nkey "$dir/keys/node-$node.nk" \
		--http-listen 127.0.0.1:0 --image-registry-listen "127.0.0.1:$((15049 + n + offset))" \
		>"$dir/$node/jetlet.log" 2>&1 &
	echo $! >"$dir/$node/pid"
	wait_for "node $node Ready" node_ready "$node"
	printf 'local.sh: node %s Ready (log %s)\n' "$node" "$dir/$node/jetlet.log"
}

node_ready() { as scheduler get nodes --node "$1" | grep -Eq "^$1 +Ready"; }

up() {
	[ ! -e "$dir/nodes" ] || die "$dir holds a fleet already: local.sh down $dir first"
	mkdir -p "$dir/nats"
	binaries
	printf '%s\n' "${@:-node1 node2}" | tr ' ' '\n' | grep . >"$(nodes_file)"
	local password routes=() i
	password=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
	for i in "${servers[@]}"; do routes+=("127.0.0.1:$(route_port "$i")"); done
	sed -e "s/ROUTE_PASSWORD/$password/g" \
		-e "s#@node1:6222#@${routes[0]}#" -e "s#@node2:6222#@${routes[1]}#" -e "s#@node3:6222#@${routes[2]}#" \
		"$repo/deploy/nats/routes.conf.example" >"$dir/nats/routes.conf"
	chmod 0600 "$dir/nats/routes.conf"
	write_auth
	for i in "${servers[@]}"; do start_server "$i"; done
	wait_for "three healthy servers" healthy
	wait_for "streams provisioned" as operator provision --replicas 3
	while read -r node; do start_node "$node"; done <"$(nodes_file)"
	env_of scheduler
}

add_node() {
	local node=$1
	binaries
	! grep -qx "$node" "$(nodes_file)" || die "node $node is in the fleet already"
	echo "$node" >>"$(nodes_file)"
	write_auth
	local i
	for i in "${servers[@]}"; do kill -HUP "$(cat "$dir/nats/nats$i.pid")"; done
	wait_for "the servers reloaded" reloaded
	start_node "$node"
}

# reloaded: every server logged its last reload as done, none as failed.
reloaded() {
	local i
	for i in "${servers[@]}"; do
		! grep -q "Failed to reload" "$dir/nats/nats$i.log" || die "nats$i: $(grep "Failed to reload" "$dir/nats/nats$i.log" | tail -1)"
		grep -q "Reloaded server configuration" "$dir/nats/nats$i.log" || return 1
	done
}

env_of() {
	local role=${1:-scheduler}
	[ -f "$dir/keys/$role.nk" ] || die "no key for role $role in $dir/keys"
	printf 'export JETLET_NATS_URL=%s\nexport JETLET_NATS_NKEY=%s\n' "$(urls)" "$dir/keys/$role.nk"
	[ "$role" != auditor ] || printf 'export JETLET_NATS_INBOX_PREFIX=_INBOX_auditor\n'
}

down() {
	binaries
	local pods ref node
	# Pods outlive jetlet by design: delete them while their nodes run.
	if pods=$(as operator get pods -A -o json 2>/dev/null); then
		python3 -c 'import json,sys; [print(p["namespace"]+"/"+p["name"], p["node"]) for p in json.load(sys.stdin)["items"] if p.get("phase") != "Terminated"]' <<<"$pods" |
			while read -r ref node; do as operator delete "$ref" --node "$node" --grace 0 --wait >/dev/null 2>&1 || true; done
	fi
	# The nodes first, while their servers can take their last words.
	stop "the nodes" "$dir"/*/pid
	stop "the servers" "$dir"/nats/nats*.pid
	rm -f "$(nodes_file)"
}

# stop sends SIGTERM to the process of each pid file and waits for them.
stop() {
	local what=$1 pidfile pid
	shift
	pids=()
	for pidfile in "$@"; do
		[ -f "$pidfile" ] || continue
		pid=$(cat "$pidfile")
		pids+=("$pid")
		kill -TERM "$pid" 2>/dev/null || true
		rm -f "$pidfile"
	done
	wait_for "$what stopped" stopped
}

stopped() {
	local pid
	for pid in "${pids[@]}"; do
		if kill -0 "$pid" 2>/dev/null; then return 1; fi
	done
}

[ $# -ge 2 ] || die "usage: local.sh up|add-node|env|down DIR [...]"
cmd=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
case $cmd in
up) up "$@" ;;
add-node) [ $# = 1 ] || die "usage: local.sh add-node DIR NODE"; add_node "$1" ;;
env) env_of "$@" ;;
down) down ;;
*) die "unknown command $cmd: up, add-node, env or down" ;;
esac
