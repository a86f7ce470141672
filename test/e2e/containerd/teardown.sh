#!/usr/bin/env bash
# teardown.sh: stop the private containerd setup.sh started and clean up.
#
# Removes every pod first (with crictl; otherwise shims and containers
# outlive containerd), stops containerd by its recorded pid (SIGTERM, a
# bounded wait, then SIGKILL), deletes any runc container left in our runc
# root, ends shims still serving our socket, unmounts what is left under the
# work dir and removes its root and state, then the pod network's loopback
# guard and bridge (network.sh). Kept for the next setup: crictl, the image
# tarballs. Safe to run twice, or when nothing is running. Never touches
# another containerd: everything is found through our socket, our pid
# file, our runc root, our work dir or network.sh.
set -uo pipefail

export PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
WORK=${JETLET_CONTAINERD_DIR:-/tmp/jetlet-containerd}
SOCK=$WORK/containerd.sock
STOP_TIMEOUT=${JETLET_CONTAINERD_STOP_TIMEOUT:-20} # seconds

log() { printf '== teardown: %s\n' "$*"; }

[ "$(id -u)" = 0 ] || { echo "teardown: must run as root" >&2; exit 1; }
[ -d "$WORK" ] || { log "nothing to do ($WORK absent)"; exit 0; }

pid=
if [ -s "$WORK/containerd.pid" ]; then
	pid=$(cat "$WORK/containerd.pid")
	# Only a live containerd with our config counts; a recycled pid does not.
	if ! tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "--config $WORK/config.toml"; then
		pid=
	fi
fi

# ctr of the flavour setup.sh started (containerd.bindir), else Debian's.
ctr=ctr
if [ -s "$WORK/containerd.bindir" ]; then
	ctr=$(cat "$WORK/containerd.bindir")/ctr
fi

# 1. pods, through CRI, while containerd runs.
if [ -n "$pid" ] && [ -S "$SOCK" ] && [ -x "$WORK/bin/crictl" ]; then
	crictl_() { timeout 120 "$WORK/bin/crictl" --config "$WORK/crictl.yaml" --runtime-endpoint "unix://$SOCK" --image-endpoint "unix://$SOCK" --timeout 60s "$@"; }
	n=$(crictl_ pods -q 2>/dev/null | wc -l)
	if [ "$n" -gt 0 ]; then
		log "removing $n pod(s)"
		crictl_ rmp --all --force >/dev/null || log "crictl rmp failed; continuing"
	fi
	# Containers outside CRI (ctr run by hand) in our namespace.
	for id in $("$ctr" --address "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
		"$ctr" --address "$SOCK" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1
		"$ctr" --address "$SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1
	done
fi

# 2. containerd, by its pid.
if [ -n "$pid" ]; then
	log "stopping containerd pid $pid"
	kill -TERM "$pid" 2>/dev/null
	deadline=$((SECONDS + STOP_TIMEOUT))
	while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		log "containerd still running after ${STOP_TIMEOUT}s: SIGKILL"
		kill -KILL "$pid" 2>/dev/null
		while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
	fi
fi
rm -f "$WORK/containerd.pid"

# 3. leftovers: containers in our runc root, then shims serving our socket.
for ns_root in "$WORK"/runc/*/; do
	[ -d "$ns_root" ] || continue
	for id in $(runc --root "$ns_root" list -q 2>/dev/null); do
		log "deleting leftover runc container $id"
		runc --root "$ns_root" delete --force "$id" >/dev/null 2>&1
	done
done
for p in $(pgrep -f 'containerd-shim' 2>/dev/null); do
	if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "-address $SOCK "; then
		log "ending leftover shim pid $p"
		kill -KILL "$p" 2>/dev/null
	fi
done

# 4. mounts under the work dir (overlay rootfs, shm, netns), deepest first.
mounts() { awk -v w="$WORK/" 'index($5, w) == 1 { print $5 }' /proc/self/mountinfo | sort -r; }
for _ in 1 2 3; do
	m=$(mounts)
	[ -z "$m" ] && break
	for mp in $m; do umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null; done
done
if [ -n "$(mounts)" ]; then
	log "still mounted:"; mounts
	exit 1
fi

# 5. state; keep crictl and the image tarballs for the next setup.
rm -rf "$WORK/root" "$WORK/state" "$WORK/runc" "$WORK/opt" "$WORK/cni/ipam" "$SOCK" "$SOCK.ttrpc" "$WORK/env.sh" "$WORK/containerd.bindir"
# The pod network's guard (every copy: an interrupted setup may have left
# one) and bridge.
# shellcheck source=network.sh
source "$(dirname "$0")/network.sh"
while iptables -D INPUT "${LOOPBACK_GUARD[@]}" 2>/dev/null; do :; done
ip link del "$CNI_BRIDGE" 2>/dev/null
log "done"
exit 0
