package pullmanager

import (
	"fmt"
	"slices"
	"strings"

	"github.com/jetlet/jetlet/schemas/imageref"
)

// Policy is kubelet's imagePullCredentialsVerificationPolicy: which images
// present on the node a pod must prove it may pull before it uses them.
type Policy string

// kubelet's four policies.
const (
	// NeverVerify: any pod may use any image present (kubelet before 1.33).
	NeverVerify Policy = "NeverVerify"
	// NeverVerifyPreloadedImages: images jetlet did not pull (imported with
	// `jetlet image import`, or present before it kept records) are
	// everyone's; images it pulled are verified. kubelet's default.
	NeverVerifyPreloadedImages Policy = "NeverVerifyPreloadedImages"
	// NeverVerifyAllowlistedImages: the allowlist's images are everyone's;
	// every other image is verified, preloaded or not.
	NeverVerifyAllowlistedImages Policy = "NeverVerifyAllowlistedImages"
	// AlwaysVerify: every image is verified; a preloaded image must be
	// pulled again by a pod that wants it.
	AlwaysVerify Policy = "AlwaysVerify"
)

// DefaultPolicy is kubelet's default.
const DefaultPolicy = NeverVerifyPreloadedImages

// policies are the valid values, in kubelet's order.
var policies = []Policy{NeverVerify, NeverVerifyPreloadedImages, NeverVerifyAllowlistedImages, AlwaysVerify}

// ParsePolicy checks a policy's name.
func ParsePolicy(s string) (Policy, error) {
	if p := Policy(s); slices.Contains(policies, p) {
		return p, nil
	}
	names := make([]string, len(policies))
	for i, p := range policies {
		names[i] = string(p)
	}
	return "", fmt.Errorf("unknown image pull credentials verification policy %q (one of %s)", s, strings.Join(names, ", "))
}

// allowlist is NeverVerifyAllowlistedImages' list (kubelet's
// preloadedImagesVerificationAllowlist): image names without tag or digest
// ("registry.example/team/img"), or prefixes ending in "/*"
// ("registry.example/team/*").
type allowlist struct {
	names    map[string]bool
	prefixes []string
}

// parseAllowlist checks each pattern as kubelet's getAllowlistImagePattern.
func parseAllowlist(patterns []string) (allowlist, error) {
	a := allowlist{names: map[string]bool{}}
	for _, p := range patterns {
		if p != strings.TrimSpace(p) {
			return allowlist{}, fmt.Errorf("allowlist pattern %q: leading/trailing spaces are not allowed", p)
		}
		trimmed, wildcard := strings.CutSuffix(p, "*")
		wildcard = wildcard && strings.HasSuffix(trimmed, "/")
		if !wildcard {
			trimmed = p
		}
		switch {
		case trimmed == "":
			return allowlist{}, fmt.Errorf("allowlist pattern %q is too short", p)
		case strings.ContainsRune(trimmed, '*'):
			return allowlist{}, fmt.Errorf("allowlist pattern %q: only patterns ending with '/*' are allowed", p)
		case wildcard && len(trimmed) == 1:
			return allowlist{}, fmt.Errorf("allowlist pattern %q: at least a registry hostname is required", p)
		case wildcard:
			a.prefixes = append(a.prefixes, trimmed)
			continue
		}
		name, err := imageName(trimmed)
		if err != nil {
			return allowlist{}, fmt.Errorf("allowlist pattern %q: %w", p, err)
		}
		if name != trimmed {
			return allowlist{}, fmt.Errorf("allowlist pattern %q: give the image's full name without tag or digest (%s)", p, name)
		}
		a.names[name] = true
	}
	return a, nil
}

func (a allowlist) has(image string) bool {
	name, err := imageName(image)
	if err != nil {
		return false
	}
	return a.names[name] || slices.ContainsFunc(a.prefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// requireVerification says whether a pod must show credentials for image
// (kubelet's RequireCredentialVerificationForImage); pulledByJetlet: a
// record or an intent of the image exists.
func (m *Manager) requireVerification(image string, pulledByJetlet bool) bool {
	switch m.policy {
	case NeverVerify:
		return false
	case NeverVerifyPreloadedImages:
		return pulledByJetlet
	case NeverVerifyAllowlistedImages:
		return !m.allowlist.has(image)
	}
	return true
}

// imageName is the normalised name without tag or digest
// ("docker.io/library/busybox"), as kubelet's ParseImageName gives it.
func imageName(image string) (string, error) {
	r, err := imageref.Parse(image)
	if err != nil {
		return "", err
	}
	return r.Repo(), nil
}
