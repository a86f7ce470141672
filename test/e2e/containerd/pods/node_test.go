package containerd_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// A `jetlet run` driving containerd says what its node is: the machine's
// facts from the host, its images from containerd's CRI.
func TestNodeRecordOnContainerd(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	rec := n.waitRecord(t, "a node record listing images", func(rec schemas.NodeRecord) bool { return len(rec.Images) > 0 })
	jetlettest.CheckNodeRecord(t, rec, "busybox")
}

// waitRecord waits until the node's record in jetlet_nodes satisfies ok.
func (n *node) waitRecord(t *testing.T, what string, ok func(schemas.NodeRecord) bool) schemas.NodeRecord {
	t.Helper()
	kv, err := n.js.KeyValue(t.Context(), schemas.BucketNodes)
	if err != nil {
		t.Fatal(err)
	}
	var rec schemas.NodeRecord
	poll.Until(t, 60*time.Second, poll.Msg(what), func() bool {
		e, err := kv.Get(t.Context(), n.name)
		return err == nil && json.Unmarshal(e.Value(), &rec) == nil && ok(rec)
	})
	return rec
}
