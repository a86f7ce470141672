package containerd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// jetlet rotates a chatty container's log through containerd's
// ReopenContainerLog: 70 MiB written leave at most 5 files, all but the
// newest two compressed.
func TestAChattyContainersLogIsRotated(t *testing.T) {
	s := newSuite(t)
	n := s.startNode("--container-log-max-size", "10Mi", "--container-log-max-files", "5", "--container-log-monitor-interval", "100ms")
	uid := s.uid("chatty")
	n.publish(uid, s.podJSON(uid, 1, "Always",
		`for i in $(seq 70); do head -c 1047552 /dev/zero | tr '\0' x | fold -w 1023; echo; sleep 0.05; done; echo done; `+untilTerm))
	st := n.waitStatus(uid, 60*time.Second, "Running", running)
	resp, err := s.cri.ContainerStatus(context.Background(), st.Containers[0].ContainerID, false)
	if err != nil {
		t.Fatal(err)
	}
	log := resp.GetStatus().GetLogPath()
	var files []string
	poll.Until(t, 2*time.Minute, func() string {
		return "the log to end with done and its rotation to settle, at most 5 files; files " + strings.Join(files, " ")
	}, jetlettest.RotationSettles(log, 10<<20, 5, " stdout F done\n", 25, &files)) // 500 ms: 5 monitor intervals
	jetlettest.CheckChattyLogRotation(t, files)
}
