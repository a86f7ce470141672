package client

import (
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// describe shows a crash-looping pod's last exit code and its BackOff
// events, and the probes and pod-level resources of its spec.
func TestDescribeCrashLoopingPod(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", func(p *corev1.Pod) bool { return p.Name == "crashloop" })
	probed := strings.Replace(podYAML("crashloop", "app"), `    command: ["sh", "-c", "sleep 1000"]`,
		`    command: ["sh", "-c", "sleep 1000"]
    livenessProbe:
      exec:
        command: ["cat", "/tmp/healthy"]
      periodSeconds: 5`, 1)
	probed = strings.Replace(probed, "spec:\n", "spec:\n  resources:\n    limits:\n      memory: 64Mi\n", 1)
	wantCode(t, c.runIn(probed, "apply", "-f", "-", "--wait"), 2)

	res := c.run("describe", "pod", "default/crashloop")
	wantCode(t, res, 0)
	t.Logf("describe pod:\n%s", res.stdout)
	for _, want := range []string{
		`(?m)^Name:\s+crashloop$`, `(?m)^Node:\s+n1$`, `(?m)^Status:\s+CrashLoopBackOff$`,
		`(?m)^Pod Limits:\s+memory=64Mi$`, `(?m)^Pod Requests:\s+memory=64Mi$`,
		`(?m)^  app:$`, `(?m)^    State:\s+Waiting$`, `(?m)^      Reason:\s+CrashLoopBackOff$`,
		`(?m)^    Last State:\s+Terminated$`, `(?m)^      Reason:\s+Error$`, `(?m)^      Exit Code:\s+1$`,
		`(?m)^    Restart Count:\s+3$`,
		`(?m)^    Liveness:\s+exec \[cat /tmp/healthy\] delay=0s timeout=1s period=5s #success=1 #failure=3$`,
		`(?m)^Events:$`, `(?m)^  \S+\s+BackOff\s+app\s+.*back-off 10s restarting failed container app$`,
		`(?m)^  \S+\s+ContainerDied\s+app\s+Error, exit 1`,
	} {
		if !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("describe does not match %s", want)
		}
	}

	res = c.run("describe", "pod", "default/nothere")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "pod default/nothere not found")
}
