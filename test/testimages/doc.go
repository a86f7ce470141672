// Package testimages builds the OCI images jetlet's tests run, from the
// host's busybox-static and nothing else (no image from outside, ever), and
// serves them: as a registry (Serve, an in-memory ggcr registry on
// 127.0.0.1, public or private), as an OCI image layout or a `docker save`
// archive (WriteOCILayout, WriteDockerArchive).
//
// Images, each built once per process and reproducible (the same busybox
// makes the same digests):
//
//   - Busybox: busybox, its applets, users and a few dirs;
//   - Httpd: Busybox serving /var/www on port 80;
//   - NonRoot: Busybox that runs as jetlet (1000) in /home/jetlet;
//   - Layered: Busybox and a layer with a whiteout, an opaque dir, a hard
//     link and a symlink, for an unpacker's tests;
//   - WithProgram: Busybox and a test's own static program at /bin/<name>
//     (not kept: each call builds it);
//   - Critest: an image for each reference critest v1.37.0 pulls, built as
//     critest expects (content, user, entrypoint, ports).
//
// Each one's doc comment says what each of its paths holds, so that tests
// can assert it. test/testimages/cmd/testimages writes the archives and
// serves the registry for shell stages (test/critest/run.sh).
package testimages

import (
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Named is this package's own images under the references
// test/testimages/cmd/testimages serves and writes them as (docker.io's,
// once normalised; testimages/busybox:latest is served as
// <registry>/testimages/busybox:latest):
//
//	testimages/busybox:latest   Busybox
//	testimages/httpd:latest     Httpd
//	testimages/nonroot:latest   NonRoot
//	testimages/layered:latest   Layered
func Named() (map[string]v1.Image, error) {
	images := map[string]v1.Image{}
	for ref, fn := range map[string]func() (v1.Image, error){
		"testimages/busybox:latest": Busybox,
		"testimages/httpd:latest":   Httpd,
		"testimages/nonroot:latest": NonRoot,
		"testimages/layered:latest": Layered,
	} {
		img, err := fn()
		if err != nil {
			return nil, err
		}
		images[ref] = img
	}
	return images, nil
}
