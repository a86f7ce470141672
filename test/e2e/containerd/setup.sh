#!/usr/bin/env bash
# setup.sh: install and start a private containerd for jetlet's e2e tests.
#
# JETLET_CONTAINERD_SYSTEMD_CGROUP=true writes SystemdCgroup = true in the v2
# flavour's config (vm.sh, for the guest).
#
# JETLET_CONTAINERD_FLAVOUR picks the containerd:
#   debian  Debian's package (1.6 on Debian 12), config version 2 (default)
#   v2      containerd $CONTAINERD_V2_VERSION built from the Go module proxy
#           (CGO off, tag no_btrfs) and cached in
#           $JETLET_CONTAINERD_CACHE/containerd-v2-<version>, config version 3
# Both run Debian's runc and CNI plugins.
#
# As root on Debian 12: installs runc, the CNI plugins, busybox-static and gcc
# (and containerd for debian) from Debian; builds a busybox image and a pause image
# locally (no registry involved) and imports them; starts containerd in the
# background with its own config, root, state and socket under
# $JETLET_CONTAINERD_DIR (default /tmp/jetlet-containerd); and writes
# $JETLET_CONTAINERD_DIR/env.sh for tests to source:
#
#	JETLET_CRI_ENDPOINT=unix://<dir>/containerd.sock
#	JETLET_CRI_IMAGE=localhost/jetlet/busybox:e2e
#	JETLET_CRI_PAUSE_IMAGE=localhost/jetlet/pause:e2e
#	JETLET_CONTAINERD_FLAVOUR=debian or v2
#	JETLET_CONTAINERD_BUS_REGISTRY=127.0.0.1:5051
#
# containerd reads hosts.toml from $JETLET_CONTAINERD_DIR/certs.d (the CRI
# registry config_path), where _default/hosts.toml makes
# http://$JETLET_CONTAINERD_BUS_REGISTRY the first host of every pull: the
# address a test's jetlet serves the images of the bus on
# (--image-registry-listen), as deploy/containerd/certs.d does for a node's
# 127.0.0.1:5050.
#
# Idempotent: a containerd this script started before is torn down first
# (teardown.sh), then everything is started afresh; packages, crictl and the
# image tarballs are reused. Nothing outside the work dir is touched besides
# the packages, the pod network's bridge, its loopback guard's iptables rule
# (network.sh), the NAT rules the bridge plugin adds per pod and the
# netns/cgroups runc makes.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
export PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
WORK=${JETLET_CONTAINERD_DIR:-/tmp/jetlet-containerd}
export JETLET_CONTAINERD_DIR=$WORK
SOCK=$WORK/containerd.sock
BUSYBOX_IMAGE=localhost/jetlet/busybox:e2e
PAUSE_IMAGE=localhost/jetlet/pause:e2e
CRICTL_VERSION=v1.37.0
# The loopback registry of the bus that certs.d/_default/hosts.toml names. A
# fixed port of its own: below the kernel's ephemeral range (32768-60999),
# so no listener on port 0 takes it, and not jetlet's default 5050, which a
# jetlet running on the machine may hold; nothing else in the stage listens
# on a fixed port.
BUS_REGISTRY=127.0.0.1:5051
# shellcheck source=network.sh
source "$here/network.sh"
FLAVOUR=${JETLET_CONTAINERD_FLAVOUR:-debian}
# The newest v2 release that builds with this Go (1.26) when it was chosen.
CONTAINERD_V2_VERSION=v2.4.2
CACHE=${JETLET_CONTAINERD_CACHE:-/var/cache/jetlet-ci}
READY_TIMEOUT=${JETLET_CONTAINERD_READY_TIMEOUT:-60} # seconds
# The v2 flavour's runc cgroup driver: true (systemd) for the guest, where
# vm.sh moves the config; this host has no systemd.
SYSTEMD_CGROUP=${JETLET_CONTAINERD_SYSTEMD_CGROUP:-false}

log() { printf '== setup [%3ds]: %s\n' "$SECONDS" "$*"; }
die() { printf '== setup: FAILED: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (containerd and runc need it)"
case $WORK in /*) ;; *) die "JETLET_CONTAINERD_DIR must be absolute: $WORK" ;; esac
# A unix socket path holds at most 107 bytes.
[ ${#SOCK} -le 100 ] || die "socket path too long: $SOCK"

case $FLAVOUR in
debian) bindir=/usr/bin ;;
v2) bindir=$CACHE/containerd-v2-$CONTAINERD_V2_VERSION ;;
*) die "JETLET_CONTAINERD_FLAVOUR=$FLAVOUR: want debian or v2" ;;
esac

# --- 1. packages ---------------------------------------------------------
pkgs="runc containernetworking-plugins busybox-static gcc libc6-dev iproute2 iptables jq"
[ "$FLAVOUR" = debian ] && pkgs="containerd $pkgs"
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	log "apt-get install$missing"
	export DEBIAN_FRONTEND=noninteractive
	# One apt-get at a time (CI runs the containerd and guest stages side
	# by side): a second update fails at once on apt's lists lock.
	# shellcheck disable=SC2086
	flock /run/lock/jetlet-ci-apt sh -c 'apt-get -qq -o DPkg::Lock::Timeout=300 update &&
		apt-get -qq -y -o DPkg::Lock::Timeout=300 --no-install-recommends install "$@" >/dev/null' apt-get $missing
else
	log "packages present: $pkgs"
fi
# Debian's containerd package starts a system containerd where systemd runs;
# ours is separate (own socket, root, state, runc root) either way.

mkdir -p "$WORK/bin" "$WORK/images"

# --- 2. crictl (teardown removes pods with it; handy by hand too) ----------
# (go install leaves crictl's own --version "unknown"; the module version is
# in the binary's build info.)
if ! go version -m "$WORK/bin/crictl" 2>/dev/null | grep -q "sigs.k8s.io/cri-tools[[:space:]]*$CRICTL_VERSION"; then
	log "go install crictl@$CRICTL_VERSION"
	GOBIN=$WORK/bin go install "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
fi

# --- 2b. containerd v2, built once per machine and version ---------------------
# Its own directory, so that containerd finds this shim first on its PATH
# (and ctr matches it).
if [ "$FLAVOUR" = v2 ] && ! { [ -x "$bindir/containerd" ] && [ -x "$bindir/containerd-shim-runc-v2" ] && [ -x "$bindir/ctr" ]; }; then
	log "building containerd $CONTAINERD_V2_VERSION from the Go module proxy (cached in $bindir)"
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/.containerd-v2-build.XXXXXX")
	mod=github.com/containerd/containerd/v2
	# A throwaway GOBIN, moved into place whole: an interrupted build leaves no half cache.
	(cd "$tmp" && CGO_ENABLED=0 GOBIN=$tmp/bin go install -tags no_btrfs \
		"$mod/cmd/containerd@$CONTAINERD_V2_VERSION" \
		"$mod/cmd/containerd-shim-runc-v2@$CONTAINERD_V2_VERSION" \
		"$mod/cmd/ctr@$CONTAINERD_V2_VERSION") || { rm -rf "$tmp"; die "building containerd $CONTAINERD_V2_VERSION failed"; }
	rm -rf "$bindir"
	mv "$tmp/bin" "$bindir"
	rm -rf "$tmp"
	log "built containerd $CONTAINERD_V2_VERSION"
fi

# --- 3. a previous run's containerd: tear it down --------------------------
if [ -e "$WORK/containerd.pid" ] || [ -e "$SOCK" ] || [ -d "$WORK/state" ] || [ -d "$WORK/root" ]; then
	log "tearing down the previous run"
	bash "$here/teardown.sh"
fi

# --- 4. images -------------------------------------------------------------
# Rebuilt when their inputs change (the busybox binary, pause.c, this
# script's image recipe); the tarballs are reproducible, so a rebuild from the
# same inputs gives the same digests.
stamp() { cat "$@" | sha256sum | cut -c1-16; }
build=$WORK/build

bb_key=$(stamp /bin/busybox "$here/build-image.sh" "$0")
bb_tar=$WORK/images/busybox-$bb_key.tar
if [ ! -s "$bb_tar" ]; then
	log "building $BUSYBOX_IMAGE"
	rm -rf "$build" && mkdir -p "$build/busybox"
	r=$build/busybox
	mkdir -p "$r/bin" "$r/sbin" "$r/usr/bin" "$r/usr/sbin" "$r/etc" "$r/root" "$r/tmp" "$r/var" \
		"$r/proc" "$r/sys" "$r/dev"
	chmod 1777 "$r/tmp"
	cp /bin/busybox "$r/bin/busybox"
	chmod 0755 "$r/bin/busybox"
	# Every applet a hard link to the one binary.
	busybox --list-full | while read -r applet; do
		[ "$applet" = bin/busybox ] && continue
		mkdir -p "$r/$(dirname "$applet")"
		ln "$r/bin/busybox" "$r/$applet"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$r/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
	bash "$here/build-image.sh" "$r" "$BUSYBOX_IMAGE" "$bb_tar.tmp" \
		'{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":["sh"]}'
	mv "$bb_tar.tmp" "$bb_tar"
fi

pause_key=$(stamp "$here/pause.c" "$here/build-image.sh" "$0")
pause_tar=$WORK/images/pause-$pause_key.tar
if [ ! -s "$pause_tar" ]; then
	log "building $PAUSE_IMAGE"
	rm -rf "$build" && mkdir -p "$build/pause"
	gcc -static -Os -s -Wall -Werror -o "$build/pause/pause" "$here/pause.c"
	bash "$here/build-image.sh" "$build/pause" "$PAUSE_IMAGE" "$pause_tar.tmp" \
		'{"Entrypoint":["/pause"],"User":"65535:65535"}'
	mv "$pause_tar.tmp" "$pause_tar"
fi
rm -rf "$build"
# Drop tarballs of earlier inputs.
find "$WORK/images" -name '*.tar' ! -name "${bb_tar##*/}" ! -name "${pause_tar##*/}" -delete

# --- 5. config ---------------------------------------------------------------
# The pod network: deploy/containerd/10-jetlet.conflist, the one
# docs/containerd.md gives operators, with the stage's own network name,
# bridge, subnet and address store (teardown.sh removes them), and the
# loopback guard docs/containerd.md has operators add: without it, portmap's
# route_localnet lets a pod reach the host's 127.0.0.1 through the bridge
# (network.sh). The escape suite's pods run on it, at the
# default level; the pod scenarios are hostNetwork on purpose, and the CRI
# conformance suite's sandboxes are the node's network.
mkdir -p "$WORK/cni/net.d"
jq --arg name "$CNI_NAME" --arg bridge "$CNI_BRIDGE" --arg subnet "$CNI_SUBNET" --arg ipam "$WORK/cni/ipam" '
	.name = $name
	| .plugins[0].bridge = $bridge
	| .plugins[0].ipam.ranges = [[{subnet: $subnet}]]
	| .plugins[0].ipam.dataDir = $ipam' \
	"$here/../../../deploy/containerd/10-jetlet.conflist" >"$WORK/cni/net.d/10-$CNI_NAME.conflist"
iptables -C INPUT "${LOOPBACK_GUARD[@]}" 2>/dev/null || iptables -I INPUT "${LOOPBACK_GUARD[@]}"

# Every pull asks the loopback registry of the bus first, then the image's
# own registry (on 404 or no answer); as deploy/containerd/certs.d, with the
# stage's port. A loopback registry with no hosts.toml of its own (the
# credentials test's) is still pulled from over plain HTTP.
mkdir -p "$WORK/certs.d/_default"
cat >"$WORK/certs.d/_default/hosts.toml" <<TOML
# Written by test/e2e/containerd/setup.sh.
[host."http://$BUS_REGISTRY"]
  capabilities = ["pull", "resolve"]
TOML

# What both flavours' configs say alike: the sockets and dirs, all in $WORK.
servers=$(cat <<TOML
[grpc]
  address = "$SOCK"

[ttrpc]
  address = "$SOCK.ttrpc"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$WORK/opt"
TOML
)
if [ "$FLAVOUR" = debian ]; then
cat >"$WORK/config.toml" <<TOML
# containerd 1.6 config for jetlet's e2e tests (written by setup.sh).
version = 2
root = "$WORK/root"
state = "$WORK/state"
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

$servers

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # root here lacks CAP_SYS_RESOURCE: without this every sandbox fails with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # pod network namespaces under our state dir, not /var/run/netns
  netns_mounts_under_state_dir = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # runc's state under our work dir, apart from any other containerd
        Root = "$WORK/runc"
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$WORK/cni/net.d"
    max_conf_num = 1

  # hosts.toml: _default names the registry of the bus (above). A loopback
  # host without a directory of its own (localhost, 127.0.0.1:PORT) is
  # pulled from over plain HTTP: the credentials test
  # (pods/credentials_test.go) serves its registry there;
  # pods/pushed_image_test.go pulls through the registry of the bus.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$WORK/certs.d"
TOML
else
# The same settings in containerd 2's layout (config version 3): the CRI
# plugin is split into runtime, images and the server (streaming). v2.4
# migrates it to its version 4 (server settings as plugins) with a warning
# at start; version 3 is what every 2.x reads.
cat >"$WORK/config.toml" <<TOML
# containerd 2 config for jetlet's e2e tests (written by setup.sh).
version = 3
root = "$WORK/root"
state = "$WORK/state"
oom_score = 0
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  # NRI's socket would be /var/run/nri/nri.sock, outside the work dir.
  "io.containerd.nri.v1.nri",
]

$servers

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"

  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"

  # hosts.toml, as for 1.6 (pods/pushed_image_test.go, credentials_test.go).
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = "$WORK/certs.d"

[plugins."io.containerd.cri.v1.runtime"]
  # root here lacks CAP_SYS_RESOURCE (see the 1.6 config above).
  restrict_oom_score_adj = true
  enable_selinux = false
  netns_mounts_under_state_dir = true

  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"

    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        Root = "$WORK/runc"
        SystemdCgroup = $SYSTEMD_CGROUP

  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$WORK/cni/net.d"
    max_conf_num = 1
TOML
fi

cat >"$WORK/crictl.yaml" <<YAML
runtime-endpoint: unix://$SOCK
image-endpoint: unix://$SOCK
timeout: 30
YAML

# --- 6. start containerd -------------------------------------------------------
log "starting containerd $("$bindir/containerd" --version | awk '{print $3}') ($FLAVOUR) on $SOCK"
mkdir -p "$WORK/root" "$WORK/state"
# teardown.sh's ctr is this flavour's.
echo "$bindir" >"$WORK/containerd.bindir"
# setsid: its own session, so a Ctrl-C meant for the tests does not reach it.
[ -f "$WORK/containerd.log" ] && mv "$WORK/containerd.log" "$WORK/containerd.log.prev"
# containerd looks its shim up on PATH: this flavour's first.
PATH=$bindir:$PATH setsid "$bindir/containerd" --config "$WORK/config.toml" >>"$WORK/containerd.log" 2>&1 </dev/null &
echo $! >"$WORK/containerd.pid"
pid=$(cat "$WORK/containerd.pid")

ctr_() { "$bindir/ctr" --address "$SOCK" --namespace k8s.io "$@"; }
crictl_() { "$WORK/bin/crictl" --config "$WORK/crictl.yaml" "$@"; }

deadline=$((SECONDS + READY_TIMEOUT))
until [ -S "$SOCK" ] && ctr_ version >/dev/null 2>&1 && crictl_ info >/dev/null 2>&1; do
	kill -0 "$pid" 2>/dev/null || { tail -n 30 "$WORK/containerd.log" >&2; die "containerd (pid $pid) exited"; }
	[ $SECONDS -lt $deadline ] || { tail -n 30 "$WORK/containerd.log" >&2; die "containerd not ready after ${READY_TIMEOUT}s"; }
	sleep 0.1
done
log "containerd pid $pid ready"

# --- 7. import the images --------------------------------------------------------
for tar in "$bb_tar" "$pause_tar"; do
	ctr_ images import --snapshotter overlayfs "$tar" >/dev/null
done
for img in "$BUSYBOX_IMAGE" "$PAUSE_IMAGE"; do
	crictl_ inspecti "$img" >/dev/null 2>&1 || die "CRI does not see image $img after the import"
done
log "images: $BUSYBOX_IMAGE $PAUSE_IMAGE"

# --- 8. env.sh ----------------------------------------------------------------------
cat >"$WORK/env.sh" <<ENV
# Written by test/e2e/containerd/setup.sh; source it.
export JETLET_CONTAINERD_DIR=$WORK
export JETLET_CRI_ENDPOINT=unix://$SOCK
export JETLET_CRI_IMAGE=$BUSYBOX_IMAGE
export JETLET_CRI_PAUSE_IMAGE=$PAUSE_IMAGE
export JETLET_CRI_NETWORK_READY=1
export JETLET_CONTAINERD_FLAVOUR=$FLAVOUR
# the address certs.d/_default/hosts.toml names: a test's jetlet serves the
# images of the bus there (--image-registry-listen)
export JETLET_CONTAINERD_BUS_REGISTRY=$BUS_REGISTRY
# for ctr and crictl by hand
export CONTAINERD_ADDRESS=$SOCK
export CONTAINERD_NAMESPACE=k8s.io
export CRI_CONFIG_FILE=$WORK/crictl.yaml
export PATH=$WORK/bin:$bindir:\$PATH
ENV
log "wrote $WORK/env.sh"
cat "$WORK/env.sh"
