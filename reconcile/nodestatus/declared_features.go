package nodestatus

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
	"k8s.io/component-helpers/nodedeclaredfeatures/features"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/dranodeallocatableresources"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/draoptionalnodeoperations"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/extendwebsocketstokubelet"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/inplacepodresize"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/restartallcontainers"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/usernamespaceshostnetwork"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/volumebindmountoptions"
	"k8s.io/component-helpers/nodedeclaredfeatures/types"
)

// kubeletVersion is the kubelet jetlet is (its k8s.io/api): a feature past
// its MaxVersion is no longer declared or required.
var kubeletVersion = version.MustParse("1.37.0")

// jetletGates says which of the features of the node declared features
// framework (KEP-5328, k8s.io/component-helpers/nodedeclaredfeatures; its
// features are named after kubelet's feature gates) jetlet implements:
// the gates kubelet would have on. Every framework feature is listed, with
// why it is off (TestEveryFrameworkFeatureIsDecided).
var jetletGates = types.FeatureGateMap{
	// A restart rule's RestartAllContainers action is refused (only Restart).
	restartallcontainers.RestartAllContainersOnContainerExits: false,
	// Pod-level resources are resized in place (docs/reconcile.md).
	inplacepodresize.IPPRPodLevelResourcesFeatureGate: true,
	// Init containers other than sidecars are not resized.
	inplacepodresize.IPPRInitContainersFeatureGate: false,
	// A memory-backed emptyDir's tmpfs keeps its size through a resize.
	inplacepodresize.IPPRMemoryBackedVolumesFeatureGate: false,
	// hostUsers false with hostNetwork is refused.
	usernamespaceshostnetwork.UserNamespacesHostNetworkSupportFeatureGate: false,
	// bindMountOptions are refused.
	volumebindmountoptions.VolumeBindMountOptionsFeatureGate: false,
	// No kubelet API: exec and attach go over the node service.
	extendwebsocketstokubelet.ExtendWebSocketsToKubeletFeatureGate: false,
	// No dynamic resource allocation.
	dranodeallocatableresources.DRANodeAllocatableResourcesFeature: false,
	draoptionalnodeoperations.DRAOptionalNodeOperationsFeatureGate: false,
}

// UserNamespacesSupport is kubelet's feature gate of pods with hostUsers
// false. The framework has no feature for it (every kubelet since 1.36 has
// it); a jetlet node has it only when its runtime runs pods in user
// namespaces, so jetlet declares it, under kubelet's name, when it does.
const UserNamespacesSupport = "UserNamespacesSupport"

// userNamespacesFeature is UserNamespacesSupport as a framework feature:
// a pod with hostUsers false needs it.
type userNamespacesFeature struct{}

func (userNamespacesFeature) Name() string { return UserNamespacesSupport }

func (userNamespacesFeature) Discover(cfg *types.NodeConfiguration) bool {
	return cfg.FeatureGates.Enabled(UserNamespacesSupport)
}

func (userNamespacesFeature) Requirements() *types.FeatureRequirements {
	return &types.FeatureRequirements{EnabledFeatureGates: []string{UserNamespacesSupport}}
}

func (userNamespacesFeature) InferForScheduling(pod *types.PodInfo) bool {
	return pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers
}

func (userNamespacesFeature) InferForUpdate(_, _ *types.PodInfo) bool { return false } // hostUsers is immutable

func (userNamespacesFeature) MaxVersion() *version.Version { return nil }

// declaredFeatures is the framework with jetlet's feature: the framework's
// New sorts the list it is given, so it gets a copy.
var declaredFeatures = ndf.New(append(slices.Clone(features.AllFeatures), userNamespacesFeature{}))

// FeatureConfig is what the node's declared features depend on.
type FeatureConfig struct {
	// UserNamespaces: the runtime runs pods in user namespaces.
	UserNamespaces bool
}

// DeclaredFeatures is the node's status.declaredFeatures, sorted: the
// features this node has, as kubelet discovers them from its feature gates
// and the runtime's features.
func DeclaredFeatures(cfg FeatureConfig) []string {
	gates := types.FeatureGateMap{UserNamespacesSupport: cfg.UserNamespaces}
	for k, v := range jetletGates {
		gates[k] = v
	}
	out := declaredFeatures.DiscoverNodeFeatures(&types.NodeConfiguration{FeatureGates: gates, Version: kubeletVersion})
	if out == nil {
		out = []string{}
	}
	return out
}

// MissingFeatures are the declared features pod needs that a node
// declaring declared lacks, as the scheduler's NodeDeclaredFeatures filter
// and kubelet's admission infer them: for placing pod, and, when previous
// is the pod the node runs, for updating it to pod. Sorted.
func MissingFeatures(pod, previous *corev1.Pod, declared []string) ([]string, error) {
	info := &types.PodInfo{Spec: &pod.Spec, Status: &pod.Status}
	needs := []ndf.FeatureSet{}
	reqs, err := declaredFeatures.InferForPodScheduling(info, kubeletVersion)
	if err != nil {
		return nil, err
	}
	needs = append(needs, reqs)
	// An update that changes the init containers' list is a new pod to
	// kubelet (the API refuses it), and the framework indexes one list by
	// the other's positions.
	if previous != nil && len(previous.Spec.InitContainers) == len(pod.Spec.InitContainers) {
		reqs, err = declaredFeatures.InferForPodUpdate(&types.PodInfo{Spec: &previous.Spec, Status: &previous.Status}, info, kubeletVersion)
		if err != nil {
			return nil, err
		}
		needs = append(needs, reqs)
	}
	has := declaredFeatures.TryMap(declared)
	var missing []string
	for _, need := range needs {
		m, err := declaredFeatures.MatchNodeFeatureSet(need, has)
		if err != nil {
			return nil, fmt.Errorf("matching declared features: %w", err)
		}
		for _, name := range m.UnsatisfiedRequirements {
			if !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
		}
	}
	slices.Sort(missing)
	return missing, nil
}
