#!/usr/bin/env bash
# vm.sh: the containerd pod scenarios (test/e2e/containerd/pods) in CI's
# guest (test/vm: Debian 12, systemd as PID 1, cgroup v2 only), on
# containerd 2 with Debian's runc and SystemdCgroup = true: jetlet reads the
# systemd driver from the runtime's RuntimeConfig and makes kubelet's slices
# (docs/containerd.md, Pod cgroups and the cgroup driver).
#
# On the host, setup.sh (flavour v2, JETLET_CONTAINERD_SYSTEMD_CGROUP=true)
# builds or reuses what the containerd stage caches (containerd 2's build in
# /var/cache/jetlet-ci, the images) and writes the config; its containerd
# is torn down at once (this host has no systemd). The config, binaries,
# images and env.sh go to the guest, where vm-guest.sh starts containerd
# at boot, and test/vm/run.sh runs the scenarios' test binary there with
# jetlet and jetlet-shim prebuilt. JETLET_VM_RUN narrows the scenarios.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
WORK=${JETLET_CONTAINERD_DIR:-/tmp/jetlet-containerd}
export JETLET_CONTAINERD_DIR=$WORK
start=$SECONDS

setup=$(mktemp -d /var/tmp/jetlet-containerd-vm.XXXXXX)
trap 'rm -rf "$setup"' EXIT
if ! JETLET_CONTAINERD_FLAVOUR=v2 JETLET_CONTAINERD_SYSTEMD_CGROUP=true bash "$here/setup.sh" >"$setup/setup.log" 2>&1; then
	cat "$setup/setup.log"
	bash "$here/teardown.sh" || true
	exit 1
fi
mkdir "$setup/bin"
bindir=$(cat "$WORK/containerd.bindir")
cp "$bindir/containerd" "$bindir/containerd-shim-runc-v2" "$bindir/ctr" "$setup/bin/"
cp "$WORK/env.sh" "$setup/"
bash "$here/teardown.sh" >>"$setup/setup.log" 2>&1
cp -r "$WORK/config.toml" "$WORK/certs.d" "$WORK/images" "$WORK/cni/net.d" "$here/network.sh" "$setup/"
cp "$here/vm-guest.sh" "$setup/setup.sh"
echo "$WORK" >"$setup/work"
echo "== containerd in the guest: containerd $("$bindir/containerd" --version | awk '{print $3}'), SystemdCgroup = true; prepared on the host in $((SECONDS - start))s"
JETLET_VM_SETUP=$setup JETLET_VM_COMMANDS="./cmd/jetlet ./cmd/jetlet-shim" bash "$repo/test/vm/run.sh" ./test/e2e/containerd/pods
