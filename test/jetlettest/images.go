package jetlettest

import (
	"bytes"
	"os"
	"os/exec"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/jetlet/jetlet/test/testimages"
)

// TestImageRefs are the references the tests' pods run busybox
// (test/testimages) under.
var TestImageRefs = []string{"docker.io/library/busybox:1.36", "docker.io/library/busybox:latest"}

// testImageArchive is an OCI layout of busybox under TestImageRefs, built
// once per process.
var testImageArchive = sync.OnceValues(func() ([]byte, error) {
	bb, err := testimages.Busybox()
	if err != nil {
		return nil, err
	}
	refs := map[string]v1.Image{}
	for _, ref := range TestImageRefs {
		refs[ref] = bb
	}
	var b bytes.Buffer
	err = testimages.WriteOCILayout(&b, refs)
	return b.Bytes(), err
})

// ImportTestImages loads busybox under TestImageRefs into the embedded
// runtime of the jetlet run serving dataDir, as a user without a registry
// does: `jetlet image import`. A runtime of host programs (not root) has no
// store and needs none: it is left as it is.
func ImportTestImages(t testing.TB, dataDir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	archive, err := testImageArchive()
	if err != nil {
		t.Fatalf("test images: %v", err)
	}
	cmd := exec.Command(Binary(t), "image", "import", "--data-dir", dataDir, "-")
	cmd.Stdin = bytes.NewReader(archive)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("jetlet image import: %v\n%s", err, out)
	}
}
