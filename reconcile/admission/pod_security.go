package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// Level is a Pod Security Standards level, the --pod-security flag's value.
type Level string

const (
	// LevelPrivileged checks nothing.
	LevelPrivileged Level = Level(api.LevelPrivileged)
	// LevelBaseline forbids the known privilege escalations: host
	// namespaces, privileged containers, added capabilities, hostPath, ...
	LevelBaseline Level = Level(api.LevelBaseline)
	// LevelRestricted is baseline and the hardening best practices: non-root,
	// no privilege escalation, all capabilities dropped, a seccomp profile.
	LevelRestricted Level = Level(api.LevelRestricted)
)

// ParseLevel reads the --pod-security flag's value.
func ParseLevel(s string) (Level, error) {
	switch l := Level(s); l {
	case LevelPrivileged, LevelBaseline, LevelRestricted:
		return l, nil
	}
	return "", fmt.Errorf("unknown Pod Security level %q: want %s, %s or %s",
		s, LevelPrivileged, LevelBaseline, LevelRestricted)
}

// podSecurityEvaluator holds the standard's checks, as the API server's
// PodSecurity admission plugin builds them once at start; it is read only.
var podSecurityEvaluator = newPodSecurityEvaluator()

func newPodSecurityEvaluator() policy.Evaluator {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		// The library's own checks are invalid: a broken build, not a pod.
		panic(fmt.Sprintf("admission: the Pod Security Standards' checks: %v", err))
	}
	return evaluator
}

// checkPodSecurity evaluates the pod against the Pod Security Standards at
// the node's level and the latest version, and words a violation as the API
// server does (pod-security-admission's admission.EvaluatePod).
func checkPodSecurity(node *Node, pod *corev1.Pod, _ *Held) Verdict {
	level := node.PodSecurity
	if level == "" {
		level = LevelBaseline
	}
	if level == LevelPrivileged {
		return admitted
	}
	lv := api.LevelVersion{Level: api.Level(level), Version: api.LatestVersion()}
	result := policy.AggregateCheckResults(podSecurityEvaluator.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec))
	if result.Allowed {
		return admitted
	}
	return Verdict{
		Reason:  ReasonPodSecurity,
		Message: fmt.Sprintf("violates PodSecurity %q: %s", lv.String(), result.ForbiddenDetail()),
	}
}
