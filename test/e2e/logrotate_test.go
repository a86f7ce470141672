package e2e_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// A container that writes 70 MiB of logs leaves at most
// --container-log-max-files files: the current one and the newest rotated
// one as written (each about --container-log-max-size), the rest compressed,
// the oldest removed. The newest lines are all there.
func TestAChattyContainersLogIsRotated(t *testing.T) {
	dir := shortDir(t)
	n := startNode(t, dir, "", "--container-log-max-size", "10Mi", "--container-log-max-files", "5",
		"--container-log-monitor-interval", "100ms")
	// 70 MiB in 1 MiB chunks (1,024 lines of 1,023 x's and a newline), a
	// pause after each, then the last line.
	n.publish("chatty", podJSON("chatty", 1, "Always",
		`for i in $(seq 70); do head -c 1047552 /dev/zero | tr '\0' x | fold -w 1023; echo; sleep 0.05; done; echo done; exec sleep 600`))
	n.waitStatus("chatty", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	log := filepath.Join(dir, "logs", "default_p-chatty_chatty", "app", "0.log")
	var files []string
	poll.Until(t, 2*time.Minute, func() string {
		return fmt.Sprintf("the log to end with done and its rotation to settle, at most 5 files; files %s", strings.Join(files, " "))
	}, jetlettest.RotationSettles(log, 10<<20, 5, " stdout F done\n", 25, &files)) // 500 ms: 5 monitor intervals
	jetlettest.CheckChattyLogRotation(t, files)
}
