#!/usr/bin/env bash
# build-image.sh ROOTFS NAME OUT.tar CONFIG_JSON
#
# Writes a one-layer OCI image-layout tarball (oci-layout, index.json,
# blobs/sha256/...) from the directory ROOTFS, without any registry or image
# tool: the layer is an uncompressed tar, so its digest is also its diff_id.
# CONFIG_JSON is the image's "config" object (Entrypoint, Cmd, Env, ...).
# NAME goes into the index's io.containerd.image.name annotation, which
# `ctr images import` names the image by. The output is reproducible: same
# ROOTFS, same bytes.
set -euo pipefail

rootfs=$1 name=$2 out=$3 config=$4
arch=$(dpkg --print-architecture) # amd64, arm64: the same words as GOARCH

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
blobs=$tmp/layout/blobs/sha256
mkdir -p "$blobs"

# blob FILE: moves FILE into blobs/ and prints "<digest> <size>".
blob() {
	local d s
	d=$(sha256sum "$1" | cut -d' ' -f1)
	s=$(stat -c %s "$1")
	mv "$1" "$blobs/$d"
	echo "$d $s"
}

(cd "$rootfs" && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
	--format=gnu -cf "$tmp/layer.tar" -- *)
read -r layer_digest layer_size < <(blob "$tmp/layer.tar")

printf '{"architecture":"%s","os":"linux","created":"1970-01-01T00:00:00Z","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"jetlet test/e2e/containerd/build-image.sh"}]}' \
	"$arch" "$config" "$layer_digest" >"$tmp/config.json"
read -r config_digest config_size < <(blob "$tmp/config.json")

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%d}]}' \
	"$config_digest" "$config_size" "$layer_digest" "$layer_size" >"$tmp/manifest.json"
read -r manifest_digest manifest_size < <(blob "$tmp/manifest.json")

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
	"$manifest_digest" "$manifest_size" "$arch" "$name" "${name##*:}" >"$tmp/layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$tmp/layout/oci-layout"

(cd "$tmp/layout" && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
	--format=gnu -cf "$tmp/image.tar" oci-layout index.json blobs)
mv "$tmp/image.tar" "$out"
echo "built $name: manifest sha256:$manifest_digest, layer $layer_size bytes -> $out"
