package e2e_test

import (
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
)

// A `jetlet run` on the embedded runtime says what its node is: labels,
// capacity, allocatable, conditions, addresses and its images.
func TestNodeRecordOfTheEmbeddedRuntime(t *testing.T) {
	t.Parallel()
	n := startNode(t, shortDir(t), "")
	rec := n.waitRecord(t, 60*time.Second, func(rec schemas.NodeRecord) bool { return len(rec.Images) > 0 })
	jetlettest.CheckNodeRecord(t, rec, "busybox")
}
