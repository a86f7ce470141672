package escapes_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/poll"
)

// TestSubPathSymlink is kubelet's CVE-2017-1002101: a container makes a
// symbolic link in an emptyDir (to /, and a relative one climbing out of
// the volume), and another container of the pod mounts the link by
// subPath. The node must mount what is in the volume, or refuse; never the
// host's tree the link names. Also as a pod of the restricted level (a
// non-root user, every capability dropped).
func TestSubPathSymlink(t *testing.T) {
	n := startNode(t)
	c := plant(t, n)
	plantLinks := `ln -s / /ed/root && ln -s ../../../../../../../../../../../.. /ed/rel && echo planted`
	attack := c.loot(n) + `loot /h; echo ` + done
	victims := []struct{ name, subPath string }{{"abs", "root"}, {"rel", "rel"}}
	for _, level := range []struct{ uid, podSecurity, ctrSecurity string }{
		{"subpath", "", ""},
		{"subpath-restricted",
			`"securityContext":{"runAsNonRoot":true,"runAsUser":1000,"runAsGroup":1000,"seccompProfile":{"type":"RuntimeDefault"}},`,
			`"securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}`},
	} {
		ctrs := []string{}
		for _, v := range victims {
			more := []string{fmt.Sprintf(`"volumeMounts":[{"name":"ed","mountPath":"/h","subPath":%q}]`, v.subPath)}
			if level.ctrSecurity != "" {
				more = append(more, level.ctrSecurity)
			}
			ctrs = append(ctrs, container(v.name, "", attack, more...))
		}
		plant := []string{`"volumeMounts":[{"name":"ed","mountPath":"/ed"}]`}
		if level.ctrSecurity != "" {
			plant = append(plant, level.ctrSecurity)
		}
		n.apply(level.uid, level.podSecurity+`"restartPolicy":"Never","volumes":[{"name":"ed","emptyDir":{}}],
		  "initContainers":[`+container("plant", "", plantLinks, plant...)+`],
		  "containers":[`+strings.Join(ctrs, ",")+`]`)
	}
	var outs []string
	for _, uid := range []string{"subpath", "subpath-restricted"} {
		for _, v := range victims {
			out, refusal := n.attempt(uid, v.name, 90*time.Second)
			report(t, uid+"/"+v.name, out, refusal)
			outs = append(outs, out)
		}
	}
	c.check(outs...)
}

// TestSubPathSwapRace is kubelet's CVE-2021-25741: a container of the pod
// swaps a directory and a symbolic link to / at the same place of a shared
// emptyDir, in a loop, while others that mount that place by subPath are
// started again and again. None of their starts may see the host.
//
// Eight victims: every start is refused (the subPath resolves outside the
// volume, or the directory bound was removed and the bind fails, on every
// runtime so far), and refused starts back off as restarts do: four gave
// too few restarts in three minutes on containerd 1.6.
func TestSubPathSwapRace(t *testing.T) {
	n := startNode(t)
	c := plant(t, n)
	swap := `cd /ed && while :; do rm -rf x; mkdir x; rm -rf x; ln -s / x; done`
	attack := c.loot(n) + `loot /h; echo ` + done + `; exit 1`
	victims := []string{"v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8"}
	ctrs := []string{container("swapper", "", swap, `"volumeMounts":[{"name":"ed","mountPath":"/ed"}]`)}
	for _, v := range victims {
		ctrs = append(ctrs, container(v, "", attack, `"volumeMounts":[{"name":"ed","mountPath":"/h","subPath":"x"}]`))
	}
	n.apply("swap", `"restartPolicy":"Always","volumes":[{"name":"ed","emptyDir":{}}],"containers":[`+strings.Join(ctrs, ",")+`]`)
	// Sixteen starts: each victim's first, refused like the rest, counts.
	outs := n.raceStarts("swap", victims, 16)
	c.check(outs...)
}

// TestMountTargetSymlinkRace is runc's CVE-2021-30465 (and the procfs
// races of CVE-2019-16884): a container swaps the place where another
// container's second volume is mounted (inside the first volume, which
// both share) between a directory and a symbolic link out of the
// container, while that container is started again and again. The host's
// mounts must stay as they were and the container see nothing of the host.
func TestMountTargetSymlinkRace(t *testing.T) {
	n := startNode(t)
	c := plant(t, n)
	swap := fmt.Sprintf(`cd /ed && while :; do
	  rm -rf t p; mkdir t p; rm -rf t p; ln -s / t; ln -s ../../../../../../../../../..%s p; done`, c.sentinel)
	attack := c.loot(n) + `loot /shared/t; loot /shared/p/../../../../../../../../..; loot /;
	  echo "t: $(ls -a /shared/t 2>&1 | tr '\n' ' ')"; echo "p: $(ls -a /shared/p 2>&1 | tr '\n' ' ')"
	  echo "mounts: $(grep -c . /proc/self/mountinfo)"; echo ` + done + `; exit 1`
	victims := []string{"v1", "v2", "v3", "v4"}
	ctrs := []string{container("swapper", "", swap, `"volumeMounts":[{"name":"ed","mountPath":"/ed"}]`)}
	for _, v := range victims {
		ctrs = append(ctrs, container(v, "", attack, `"volumeMounts":[{"name":"ed","mountPath":"/shared"},
		  {"name":"second","mountPath":"/shared/t"},{"name":"third","mountPath":"/shared/p"}]`))
	}
	n.apply("target", `"restartPolicy":"Always","volumes":[{"name":"ed","emptyDir":{}},{"name":"second","emptyDir":{}},{"name":"third","emptyDir":{}}],
	  "containers":[`+strings.Join(ctrs, ",")+`]`)
	outs := n.raceStarts("target", victims, 8)
	c.check(outs...)
}

// raceStarts waits until the victims of the pod have been started again
// at least starts times in all, and returns what each printed. A start
// counts when it ran (the restart count) or when jetlet refused to create
// the container (each time a victim turns CreateContainerConfigError, which
// leaves the count as it is): in the subPath swap race every start is
// refused. Both back off: half a minute to two minutes.
func (n *node) raceStarts(uid string, victims []string, starts int32) []string {
	n.t.Helper()
	var total, refusals int32
	var seen []string
	last := map[string]string{}
	poll.Until(n.t, 5*time.Minute, func() string {
		return fmt.Sprintf("%d starts of %v, have %d (%d refused): %v", starts, victims, total+refusals, refusals, seen)
	}, func() bool {
		st := n.status(uid)
		total, seen = 0, nil
		for _, v := range victims {
			cs, _ := containerStatus(st, v)
			total += cs.RestartCount
			state := fmt.Sprintf("%s %s %q", cs.State, cs.Reason, cs.Message)
			if cs.Reason == "CreateContainerConfigError" && last[v] != state {
				refusals++
			}
			last[v] = state
			seen = append(seen, v+" "+state)
		}
		return total+refusals >= starts
	})
	var outs []string
	for _, v := range victims {
		out := n.logs(uid, v)
		n.t.Logf("%s/%s: %d starts printed %q; the lines they printed:\n%s", uid, v, strings.Count(out, done), done, uniqueLines(out))
		outs = append(outs, out)
	}
	n.t.Logf("%s: %d restarts, %d refused creates, last states %v", uid, total, refusals, seen)
	return outs
}

// uniqueLines is out with each line once, in the order first seen.
func uniqueLines(out string) string {
	seen := map[string]bool{}
	var b strings.Builder
	for line := range strings.Lines(out) {
		if !seen[line] {
			seen[line] = true
			b.WriteString(line)
		}
	}
	return b.String()
}
