#!/usr/bin/env bash
# image.sh OUT: builds the guest test/vm/run.sh boots, into the directory OUT:
# rootfs.img (a raw ext4 image of a Debian 12 minbase with systemd as PID 1),
# vmlinuz and initrd.img (Debian 12's linux-image-amd64, 6.1). Everything
# comes from the Debian mirror apt uses. At boot the guest mounts the host's
# directory tagged "jetlet" (virtio-9p) at /mnt/jetlet, runs
# /mnt/jetlet/guest.sh as root under systemd (jetlet-guest.service) and
# powers off, whatever the script's status, unless a test asked for a
# shutdown of its own (out/shutdown-asked: test/vm/vmguest). run.sh caches OUT keyed by this
# script's hash: a change here rebuilds the image.
set -euo pipefail
out=$1
work=$(mktemp -d /var/tmp/jetlet-vm-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root

# The first Debian mirror apt knows (a deb822 "URIs:" or a one-line "deb").
mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
	sed -n 's/^URIs: *\(http[^ ]*debian\/*\)$/\1/p; s/^deb \(http[^ ]*debian\/*\) .*/\1/p' | head -n1 || true)
mirror=${mirror:-http://deb.debian.org/debian}

# busybox-static, CNI plugins and iptables: the embedded runtime's tests
# use them as on the CI host; dbus and libpam-systemd: logind, for systemd's
# cgroup driver and shutdown inhibitors; runc: containerd's runtime.
debootstrap --variant=minbase \
	--include=systemd,systemd-sysv,udev,dbus,libpam-systemd,kmod,linux-image-amd64,busybox-static,containernetworking-plugins,iptables,procps,runc \
	bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
	tail -n 30 "$work/debootstrap.log"
	exit 1
}

echo jetlet-guest >"$root/etc/hostname"
cat >"$root/etc/fstab" <<'FSTAB'
/dev/vda / ext4 rw,errors=remount-ro 0 1
jetlet /mnt/jetlet 9p trans=virtio,version=9p2000.L,msize=1048576,cache=none 0 0
FSTAB
mkdir -p "$root/mnt/jetlet"
# 9p's modules in the initramfs too: harmless, and the mount does not wait
# for udev to load the transport.
printf '9p\n9pnet_virtio\nvirtio_blk\n' >>"$root/etc/initramfs-tools/modules"

cat >"$root/etc/systemd/system/jetlet-guest.service" <<'UNIT'
[Unit]
Description=Run the host's tests (/mnt/jetlet/guest.sh), then power off
Requires=mnt-jetlet.mount
After=mnt-jetlet.mount multi-user.target

[Service]
Type=oneshot
ExecStart=/bin/bash /mnt/jetlet/guest.sh
# Not SuccessAction=poweroff-force: stopped by a shutdown a test asked for,
# the unit would cut that shutdown short, which the test is there to watch.
ExecStopPost=/bin/sh -c 'test -f /mnt/jetlet/out/shutdown-asked || systemctl poweroff --no-block'
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
UNIT
chroot "$root" systemctl enable jetlet-guest.service >/dev/null 2>&1
# No login prompts, no timers: the guest runs one job.
chroot "$root" systemctl mask getty@tty1.service serial-getty@ttyS0.service \
	apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer >/dev/null 2>&1 || true
# No root password: a shell by hand (docs/testing.md) is systemd's
# emergency shell, which asks for none then. The guest has no network.
chroot "$root" passwd -qd root
chroot "$root" update-initramfs -u -k all >/dev/null

kernel=$(cd "$root/boot" && ls vmlinuz-* | head -n1)
cp "$root/boot/$kernel" "$work/vmlinuz"
cp "$root/boot/initrd.img-${kernel#vmlinuz-}" "$work/initrd.img"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
truncate -s 4G "$work/rootfs.img"
mkfs.ext4 -q -F -L jetlet-guest -d "$root" "$work/rootfs.img"
echo "${kernel#vmlinuz-}" >"$work/kernel-version"

# Moved into place whole: an interrupted build leaves no half image.
mkdir -p "$(dirname "$out")"
rm -rf "$out.tmp"
mkdir "$out.tmp"
mv "$work/rootfs.img" "$work/vmlinuz" "$work/initrd.img" "$work/kernel-version" "$out.tmp/"
mv "$out.tmp" "$out"
