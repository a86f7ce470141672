#!/bin/bash
# vm-guest.sh SHARE: runs in CI's guest at each boot before the pod
# scenarios (test/vm/run.sh's JETLET_VM_SETUP, given by vm.sh): the private
# containerd setup.sh configured on the host (v2, SystemdCgroup = true),
# started as a systemd unit at the host's work dir path (the config's paths
# are the host's), its images imported, the pod network's loopback guard
# inserted; the tests' environment (setup.sh's env.sh) in out/setup.env.
set -euo pipefail
share=$1
setup=$share/setup
WORK=$(cat "$setup/work")
SOCK=$WORK/containerd.sock
mkdir -p "$WORK/bin" "$WORK/root" "$WORK/state" "$WORK/cni"
cp "$setup"/bin/* "$WORK/bin/"
cp "$setup/config.toml" "$WORK/"
cp -r "$setup/images" "$setup/certs.d" "$WORK/"
cp -r "$setup/net.d" "$WORK/cni/"
# shellcheck source=network.sh
source "$setup/network.sh"
iptables -C INPUT "${LOOPBACK_GUARD[@]}" 2>/dev/null || iptables -I INPUT "${LOOPBACK_GUARD[@]}"

# As containerd's own unit: Delegate=yes; its shim and runc found first on
# its PATH (runc: Debian's, in the image).
systemctl reset-failed jetlet-e2e-containerd.service 2>/dev/null || true
systemd-run --quiet --unit=jetlet-e2e-containerd -p Delegate=yes \
	-p StandardOutput="append:$WORK/containerd.log" -p StandardError="append:$WORK/containerd.log" \
	--setenv=PATH="$WORK/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
	-- "$WORK/bin/containerd" --config "$WORK/config.toml"
ctr_() { "$WORK/bin/ctr" --address "$SOCK" --namespace k8s.io "$@"; }
deadline=$((SECONDS + 120))
until ctr_ version >/dev/null 2>&1; do
	if [ $SECONDS -ge $deadline ] || ! systemctl is-active --quiet jetlet-e2e-containerd.service; then
		tail -n 30 "$WORK/containerd.log"
		echo "containerd not ready"
		exit 1
	fi
	sleep 0.2 # polled, with a deadline
done
for tar in "$WORK"/images/*.tar; do
	ctr_ images import --snapshotter overlayfs "$tar" >/dev/null
done
echo "containerd $("$WORK/bin/containerd" --version | awk '{print $3}') ready, runc $(runc --version | sed -n '1s/runc version //p'), images imported"
sed -n 's/^export \(\(JETLET\|CONTAINERD\)_[A-Z_]*=[^$]*\)$/\1/p' "$setup/env.sh" >"$share/out/setup.env"
cat "$share/out/setup.env"
