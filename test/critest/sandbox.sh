#!/usr/bin/env bash
# sandbox.sh WORK SKIP [CRITEST ARGS...]: the inside of the critest stage
# (run.sh starts it as pid 1 of new UTS, IPC, mount, network and pid
# namespaces). It makes the "host" the embedded runtime sees: an overlay of
# the real root (writes land in a tmpfs and vanish with the namespace), its
# own /proc and /dev/shm, WORK bound from the real host (binaries, data
# dir, reports). It starts the registry of critest's images, records that
# host's state, runs `jetlet run` and critest against its embedded runtime,
# stops jetlet and the registry, records the state again in
# WORK/out/{before,after} for run.sh to compare, and exits: every process
# left in the pid namespace dies with it.
set -euo pipefail
WORK=$1
SKIP=$2
shift 2
out=$WORK/out

# 1. The overlay root.
root=$WORK/root
mount -t tmpfs -o mode=0755 jetlet-critest-root "$root"
mkdir -p "$root/upper" "$root/work" "$root/merged"
mount -t overlay jetlet-critest -o "lowerdir=/,upperdir=$root/upper,workdir=$root/work" "$root/merged"
m=$root/merged
mount -t proc proc "$m/proc"
mount --rbind /sys "$m/sys"
mount --rbind /dev "$m/dev"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$m/dev/shm"
mount --bind "$WORK" "$m$WORK"
mkdir -p "$WORK/fs-changes"
mount --bind -o ro "$root/upper" "$m$WORK/fs-changes"
cd "$m"
mkdir -p .oldroot
pivot_root . .oldroot
umount -l /.oldroot
rmdir /.oldroot
cd /
ip link set lo up

# The test images' registry (test/testimages/cmd/testimages): an image for
# every reference critest pulls, built from the host's busybox-static, in
# memory, in this run's network namespace. critest's test-images file moves
# only its default image and its web server image; it names the rest
# (registry.k8s.io/..., gcr.io/k8s-staging-cri-tools/..., k8s.gcr.io/...)
# in its source. So the registry is served twice: over plain HTTP on
# 127.0.0.1:5000, where the test-images file points those two (a loopback
# registry, which the runtime pulls from without TLS), and over TLS on
# 127.0.0.1:443 for those three names, which this run's /etc/hosts resolves
# to 127.0.0.1, with a certificate of a CA made for the run and added to the
# test host's CA bundle (the overlay's: the real one is untouched). The
# images are described in test/testimages/critest.go.
registry_dir=$WORK/registry
mkdir -p "$registry_dir"
critest_hosts="registry.k8s.io gcr.io k8s.gcr.io"
"$WORK/bin/testimages" -set critest -serve 127.0.0.1:5000 -serve-tls 127.0.0.1:443 \
	-tls-names "$(echo "$critest_hosts" | tr ' ' ,)" -ca-out "$registry_dir/ca.pem" >"$out/registry.log" 2>&1 &
registry=$!
for _ in $(seq 600); do
	grep -qs '^testimages: ready$' "$out/registry.log" && break
	kill -0 "$registry" 2>/dev/null || break
	sleep 0.1
done
if ! grep -qs '^testimages: ready$' "$out/registry.log"; then
	echo "== FAIL: the test images' registry did not start; its log:"
	tail -n 30 "$out/registry.log"
	exit 1
fi
echo "127.0.0.1 $critest_hosts" >>/etc/hosts
mkdir -p /etc/ssl/certs
cat "$registry_dir/ca.pem" >>/etc/ssl/certs/ca-certificates.crt
cat >"$registry_dir/test-images.yaml" <<IMAGES
defaultTestContainerImage: 127.0.0.1:5000/e2e-test-images/busybox:1.29-2
webServerTestImage: 127.0.0.1:5000/e2e-test-images/nginx:1.14-2
IMAGES

# state DIR records what the run must leave as it found it.
state() {
	mkdir -p "$1"
	hostname >"$1/hostname"
	stat -c '%a %U:%G' / >"$1/root-mode"
	ipcs -m -s -q | grep -E '^0x' | awk '{print $1, $3, $4, $5}' | sort >"$1/sysv-ipc" || true
	# mount point, root, options, fstype, source, super options: no ids,
	# device numbers or peer groups (those differ from run to run).
	awk '{ for (i = 7; $i != "-"; i++) ; print $5, $4, $6, $(i+1), $(i+2), $(i+3) }' /proc/self/mountinfo | sort >"$1/mounts"
	# A cgroup removed while find reads its parent makes find fail: pods
	# of other work on the machine come and go.
	{ find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null || true; } | sort >"$1/cgroups"
	# What was written on the test host (the overlay's upper layer).
	(cd "$WORK/fs-changes" && find . -mindepth 1 | sed 's|^\.||' | sort) >"$1/files"
}
state "$out/before"

# 2. jetlet run: embedded NATS and runtime, ports picked free, a pod network
# (each pod that does not ask for the host's network gets a namespace of its
# own on a bridge, in this run's network namespace, through Debian's CNI
# plugins; portmap forwards the host ports pods ask for, as containerd's
# default network does), and the flags in JETLET_CRITEST_RUN_ARGS.
data=$WORK/data
sock=$data/cri.sock
mkdir -p "$WORK/cni"
cat >"$WORK/cni/10-critest.conflist" <<CONF
{
  "cniVersion": "1.0.0",
  "name": "critest",
  "plugins": [{
    "type": "bridge", "bridge": "critest0", "isGateway": true,
    "ipam": {"type": "host-local", "dataDir": "$WORK/cni/ipam", "ranges": [[{"subnet": "10.88.0.0/16"}]]}
  }, {
    "type": "portmap", "capabilities": {"portMappings": true}
  }]
}
CONF
read -r -a run_args <<<"${JETLET_CRITEST_RUN_ARGS:-}"
PATH=$WORK/bin:$PATH "$WORK/bin/jetlet" run --node critest --data-dir "$data" \
	--nats-listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --cni-conf-dir "$WORK/cni" "${run_args[@]}" >"$out/jetlet.log" 2>&1 &
jetlet=$!
for _ in $(seq 300); do
	[ -S "$sock" ] && break
	kill -0 "$jetlet" 2>/dev/null || break
	sleep 0.2
done
if [ ! -S "$sock" ]; then
	echo "== FAIL: jetlet run did not serve $sock; the end of its log:"
	tail -n 30 "$out/jetlet.log"
	exit 1
fi

# 3. critest. Its HostIpc specs make a SysV segment on the host with
# `ipcmk -M` and never remove it: an ipcmk first in its PATH notes the ids,
# and they are removed after the run, so that only what the runtime left
# counts.
ipcmk=$(command -v ipcmk)
mkdir -p "$WORK/critest-path"
cat >"$WORK/critest-path/ipcmk" <<WRAPPER
#!/bin/sh
out=\$("$ipcmk" "\$@") || exit \$?
echo "\$out"
echo "\$out" | sed -n 's/^Shared memory id: //p' >>"$out/critest-ipcmk-ids"
WRAPPER
chmod +x "$WORK/critest-path/ipcmk"
echo "== critest against unix://$sock (log: $out/critest.log)"
rc=0
(cd "$out" && PATH=$WORK/critest-path:$PATH "$WORK/bin/critest" -runtime-endpoint "unix://$sock" -image-endpoint "unix://$sock" \
	-test-images-file "$registry_dir/test-images.yaml" -ginkgo.no-color -ginkgo.skip "$SKIP" -ginkgo.json-report "$out/report.json" "$@") >"$out/critest.log" 2>&1 || rc=$?
echo "== critest exited $rc"
tail -n 6 "$out/critest.log"

# 4. Stop jetlet (SIGTERM, then SIGKILL after 30 s), record the state again.
kill -TERM "$jetlet" 2>/dev/null || true
for _ in $(seq 150); do
	kill -0 "$jetlet" 2>/dev/null || break
	sleep 0.2
done
kill -KILL "$jetlet" 2>/dev/null || true
wait "$jetlet" 2>/dev/null || true
if [ -s "$out/critest-ipcmk-ids" ]; then
	echo "== removing the SysV segments critest made itself (ipcmk): $(tr '\n' ' ' <"$out/critest-ipcmk-ids")"
	while read -r id; do ipcrm -m "$id" || true; done <"$out/critest-ipcmk-ids"
fi
kill -TERM "$registry" 2>/dev/null || true
wait "$registry" 2>/dev/null || true
state "$out/after"
ps -e -o pid=,args= | grep -vE "^ *(1|$$) |ps -e|grep -vE" >"$out/leftover-processes" || true
