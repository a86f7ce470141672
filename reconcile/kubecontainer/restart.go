package kubecontainer

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// ContainerShouldRestart says whether container c of a pod with spec is
// restarted after it exited with exitCode, as kubelet's
// podutil.ContainerShouldRestart: the first of its restartPolicyRules that
// matches the exit code decides; no rule matching, its own restartPolicy
// does; without one, the pod's. A sidecar's policy is Always.
func ContainerShouldRestart(c *corev1.Container, spec *corev1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		for _, r := range c.RestartPolicyRules {
			if r.ExitCodes != nil && exitCodesMatch(r.ExitCodes, exitCode) {
				if r.Action == corev1.ContainerRestartRuleActionRestart {
					return true
				}
				break // another action (validation refuses them): the policy decides
			}
		}
		return policyRestarts(corev1.RestartPolicy(*c.RestartPolicy), exitCode)
	}
	return policyRestarts(spec.RestartPolicy, exitCode)
}

// RestartsOnFailure says whether c is restarted after a failure that has no
// exit code for its rules to judge (killed by a liveness or startup probe
// while it ran, an init container that failed or is in an unknown state):
// its own restartPolicy, else the pod's, restarts unless it is Never, as
// kubelet decides these cases.
func RestartsOnFailure(c *corev1.Container, spec *corev1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != corev1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != corev1.RestartPolicyNever
}

// IsContainerRestartable says whether c may ever be restarted, as kubelet's
// podutil.IsContainerRestartable: a rule that restarts, or a policy (its
// own, else the pod's) other than Never.
func IsContainerRestartable(c *corev1.Container, spec *corev1.PodSpec) bool {
	if c.RestartPolicy != nil && slices.ContainsFunc(c.RestartPolicyRules, func(r corev1.ContainerRestartRule) bool {
		return r.Action == corev1.ContainerRestartRuleActionRestart
	}) {
		return true
	}
	return RestartsOnFailure(c, spec)
}

func exitCodesMatch(e *corev1.ContainerRestartRuleOnExitCodes, exitCode int32) bool {
	in := slices.Contains(e.Values, exitCode)
	switch e.Operator {
	case corev1.ContainerRestartRuleOnExitCodesOpIn:
		return in
	case corev1.ContainerRestartRuleOnExitCodesOpNotIn:
		return !in
	}
	return false
}

// policyRestarts applies a restart policy to an exit code; the container
// policies' values are the pod's, and the empty policy is Always.
func policyRestarts(p corev1.RestartPolicy, exitCode int32) bool {
	switch p {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}
