#!/usr/bin/env bash
# run.sh [PKG[=REGEXP]...]: runs Go test packages as root in a qemu guest
# with systemd as PID 1 and the unified cgroup hierarchy only (cgroup v2): a
# host CI's own machine is not (cgroup v1 controllers, no systemd). Default
# package: ./runtime/embedded/cgroups. PKG=REGEXP runs only that package's
# tests REGEXP matches (its -test.run), in place of JETLET_VM_RUN.
#
# It installs qemu-system-x86 and debootstrap when missing; builds the guest
# once (image.sh: Debian 12, its 6.1 kernel, systemd) into
# $JETLET_VM_CACHE/vm-<hash of image.sh> (default /var/cache/jetlet-ci), or
# reuses it; compiles each package with `go test -c` (static, cgo off: the
# guest has no Go toolchain); and boots the guest under software emulation
# (tcg: this kind of machine's /dev/kvm does not boot a stock kernel) with a
# throwaway copy-on-write layer over the cached disk. The binaries (built
# with -tags jetlet_vm: guest-only tests carry that build constraint) and a
# script reach the guest over virtio-9p (mounted at /mnt/jetlet); systemd
# runs the script at boot (jetlet-guest.service), which runs each binary with
# -test.v=test2json, leaves its output and status in the shared directory and
# powers off. The host turns the output into `go test -json` and judges it
# with test/gotestcheck against test/vm/skips.allowed: a failure, a package
# that did not finish, or a skip the list does not name fails the run.
#
# A test may power the guest off or reboot it (test/vm/vmguest: Poweroff,
# Reboot): the guest then boots again from the same disk, its changes kept,
# and its binary runs again, the test reading vmguest.Boot() for its phase;
# only the last boot's output is judged. A boot that ends without the
# results and without a test asking for it fails the run.
#
# Environment: JETLET_VM_ACCEL (default tcg,thread=multi), JETLET_VM_MEM
# (default 3G), JETLET_VM_TIMEOUT (the whole boot, default 15m),
# JETLET_VM_TEST_TIMEOUT (each test binary's -test.timeout, default 10m),
# JETLET_VM_RUN (a -test.run filter for every package), JETLET_VM_COMMANDS
# (the main packages built for test/gobuild and test/vm/vmguest when a
# package uses either, default ./cmd/jetlet-shim), JETLET_VM_FILES (more
# executables put beside them, critest say), JETLET_VM_BOOTS (most
# boots, default 4), JETLET_VM_KEEP=1 (keep the shared directory, for its
# logs), JETLET_VM_SETUP (a directory copied into the guest whose setup.sh
# runs as root at each boot before the tests, with the share as its
# argument; each NAME=value line it writes to out/setup.env is in the
# tests' environment).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
export PATH=/usr/local/go/bin:$PATH
CACHE=${JETLET_VM_CACHE:-/var/cache/jetlet-ci}
start=$SECONDS
if [ "$(id -u)" != 0 ]; then
	echo "== guest: needs root (debootstrap, and tests that run as root)"
	exit 1
fi
pkgs=() filters=()
for arg in "${@:-./runtime/embedded/cgroups}"; do
	pkgs+=("${arg%%=*}")
	if [ "$arg" != "${arg#*=}" ]; then
		filters+=("${arg#*=}")
	else
		filters+=("${JETLET_VM_RUN:-}")
	fi
done

missing=
for pkg in qemu-system-x86 qemu-utils debootstrap e2fsprogs; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
	echo "== guest: apt-get install$missing"
	export DEBIAN_FRONTEND=noninteractive
	# One apt-get at a time (CI runs the containerd and guest stages side
	# by side): a second update fails at once on apt's lists lock.
	# shellcheck disable=SC2086
	flock /run/lock/jetlet-ci-apt sh -c 'apt-get -qq -o DPkg::Lock::Timeout=300 update &&
		apt-get -qq -y -o DPkg::Lock::Timeout=300 --no-install-recommends install "$@" >/dev/null' apt-get $missing
fi

image=$CACHE/vm-$(sha256sum "$here/image.sh" | cut -c1-16)
if [ ! -f "$image/rootfs.img" ]; then
	echo "== guest: building the image into $image (debootstrap, once per image.sh)"
	t=$SECONDS
	bash "$here/image.sh" "$image"
	echo "== guest: image built in $((SECONDS - t))s"
fi
echo "== guest: image $image, kernel $(cat "$image/kernel-version")"

share=$(mktemp -d /var/tmp/jetlet-vm.XXXXXX)
if [ "${JETLET_VM_KEEP:-}" = 1 ]; then
	echo "== guest: shared directory kept: $share"
else
	trap 'rm -rf "$share"' EXIT
fi
mkdir -p "$share/bin" "$share/out" "$share/run-filter"
t=$SECONDS
names=()
for pkg in "${pkgs[@]}"; do
	name=$(go list -tags jetlet_vm "$pkg" | tr / _)
	CGO_ENABLED=0 go test -c -tags jetlet_vm -o "$share/bin/$name.test" "$pkg"
	# go test runs a test in its package's directory: its testdata too.
	mkdir -p "$share/pkg/$name"
	dir=$(go list -tags jetlet_vm -f '{{.Dir}}' "$pkg")
	[ ! -d "$dir/testdata" ] || cp -r "$dir/testdata" "$share/pkg/$name/"
	printf '%s\n' "${filters[${#names[@]}]}" >"$share/run-filter/$name"
	names+=("$name")
done
# The commands tests build with test/gobuild, or install with test/vm/vmguest,
# prebuilt: the guest has no Go toolchain (gobuild.PrebuiltEnv points the
# tests at them). vmguest installs jetlet's units from deploy/.
if go list -tags jetlet_vm -deps -test "${pkgs[@]}" | grep -E -x 'github.com/jetlet/jetlet/test/(gobuild|vm/vmguest)' >/dev/null; then
	mkdir -p "$share/cmd"
	# shellcheck disable=SC2086
	CGO_ENABLED=0 go build -o "$share/cmd/" ${JETLET_VM_COMMANDS:-./cmd/jetlet-shim}
	# shellcheck disable=SC2086
	[ -z "${JETLET_VM_FILES:-}" ] || cp ${JETLET_VM_FILES} "$share/cmd/"
	cp -r deploy "$share/deploy"
fi
echo "== guest: go test -c of ${pkgs[*]} in $((SECONDS - t))s"
cp "$here/guest.sh" "$share/guest.sh"
# What the tests need running first (a containerd: test/e2e/containerd/vm.sh).
if [ -n "${JETLET_VM_SETUP:-}" ]; then
	cp -r "$JETLET_VM_SETUP" "$share/setup"
fi
printf '%s\n' "${JETLET_VM_TEST_TIMEOUT:-10m}" >"$share/test-timeout"
# The allow-list's entries of the tests run (by package, and by its
# filter, read as an ERE): another's would be stale.
skips=$share/skips.allowed
for i in "${!pkgs[@]}"; do
	filter=${filters[$i]}
	rel=$(go list -tags jetlet_vm "${pkgs[$i]}")
	rel=${rel#github.com/jetlet/jetlet/}
	grep -E "^$rel " "$here/skips.allowed" | while read -r _ test _; do
		if [ -z "$filter" ] || grep -qE -- "$filter" <<<"${test%%/*}"; then
			grep -E "^$rel $test " "$here/skips.allowed"
		fi
	done || true
done >"$skips"

# The guest's disk: a copy-on-write layer over the cached image, kept across
# the boots of this run and thrown away with the run's directory.
disk=$share/disk.qcow2
qemu-img create -q -f qcow2 -F raw -b "$image/rootfs.img" "$disk"
t=$SECONDS
boot=0
while [ ! -f "$share/out/done" ]; do
	boot=$((boot + 1))
	if [ "$boot" -gt "${JETLET_VM_BOOTS:-4}" ]; then
		echo "== guest: FAIL: still no results after $((boot - 1)) boots"
		exit 1
	fi
	echo "$boot" >"$share/boot"
	rm -f "$share/out/shutdown-asked"
	rc=0
	timeout "${JETLET_VM_TIMEOUT:-15m}" qemu-system-x86_64 \
		-accel "${JETLET_VM_ACCEL:-tcg,thread=multi}" -cpu max -smp 2 -m "${JETLET_VM_MEM:-3G}" \
		-kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
		-append "root=/dev/vda rw console=ttyS0 panic=-1 systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all systemd.show_status=0 loglevel=4" \
		-drive "file=$disk,format=qcow2,if=virtio" \
		-virtfs "local,path=$share,mount_tag=jetlet,security_model=none,id=jetlet" \
		-device virtio-rng-pci -nic none -display none -monitor none -serial stdio -no-reboot </dev/null >"$share/console.$boot.log" 2>&1 || rc=$?
	if [ -f "$share/out/done" ]; then
		break
	fi
	if [ $rc != 0 ] || [ ! -f "$share/out/shutdown-asked" ]; then
		echo "== guest: FAIL: qemu exited $rc after $((SECONDS - t))s (boot $boot) without the guest's results, and no test asked for a shutdown; its console:"
		tail -n 60 "$share/console.$boot.log"
		exit 1
	fi
	echo "== guest: boot $boot: $(cat "$share/out/shutdown-asked") asked for a shutdown at $((SECONDS - t))s; booting again"
done
boots=$boot
rc=0
echo "== guest: $(cat "$share/out/uptime")"

# The guest's test2json streams, as go test -json, judged as CI's main stage.
go build -o "$share/gotestcheck" ./test/gotestcheck
for i in "${!names[@]}"; do
	pkg=$(go list -tags jetlet_vm "${pkgs[$i]}")
	go tool test2json -p "$pkg" -t <"$share/out/${names[$i]}.log"
	if [ "$(cat "$share/out/${names[$i]}.rc")" != 0 ] && ! grep -q -- '^--- FAIL\|^FAIL' "$share/out/${names[$i]}.log"; then
		# A binary that died without a FAIL line (a panic is one) still fails.
		printf '{"Action":"fail","Package":"%s"}\n' "$pkg"
	fi
	echo "== guest: $pkg exit $(cat "$share/out/${names[$i]}.rc") in $(cat "$share/out/${names[$i]}.secs")s" >&2
done | "$share/gotestcheck" -skips "$skips" || rc=$?
echo "== guest: qemu $((SECONDS - t))s ($boots boot(s), tests, power-off), whole run $((SECONDS - start))s, exit $rc"
exit $rc
