package nodestatus

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-helpers/nodedeclaredfeatures/features"
)

// A feature the framework gains must be decided here: jetletGates names
// every gate a framework feature depends on.
func TestEveryFrameworkFeatureIsDecided(t *testing.T) {
	for _, f := range features.AllFeatures {
		for _, gate := range f.Requirements().EnabledFeatureGates {
			if _, ok := jetletGates[gate]; !ok {
				t.Errorf("feature %s: gate %s is not in jetletGates", f.Name(), gate)
			}
		}
	}
}

func TestDeclaredFeatures(t *testing.T) {
	if got, want := DeclaredFeatures(FeatureConfig{UserNamespaces: true}), []string{"InPlacePodLevelResourcesVerticalScaling", UserNamespacesSupport}; !slices.Equal(got, want) {
		t.Errorf("with user namespaces: %v, want %v", got, want)
	}
	if got, want := DeclaredFeatures(FeatureConfig{}), []string{"InPlacePodLevelResourcesVerticalScaling"}; !slices.Equal(got, want) {
		t.Errorf("without user namespaces: %v, want %v", got, want)
	}
}

// The framework's inference rows (its features' tests), against a node
// declaring what jetlet declares: each pod names what it needs and lacks.
func TestMissingFeatures(t *testing.T) {
	no := false
	base := func() *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init"}},
			Containers:     []corev1.Container{{Name: "app"}},
			Volumes: []corev1.Volume{{Name: "mem", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: new(resource.MustParse("64Mi"))}}}},
		}}
	}
	tests := []struct {
		name           string
		userNamespaces bool
		pod            func(*corev1.Pod)
		update         func(*corev1.Pod) // the pod the node runs is base, updated to pod
		want           []string
	}{
		{name: "a plain pod needs nothing"},
		{name: "hostUsers false on a node without user namespaces", pod: func(p *corev1.Pod) { p.Spec.HostUsers = &no },
			want: []string{UserNamespacesSupport}},
		{name: "hostUsers false on a node with them", userNamespaces: true, pod: func(p *corev1.Pod) { p.Spec.HostUsers = &no }},
		{name: "hostUsers false with hostNetwork", userNamespaces: true,
			pod:  func(p *corev1.Pod) { p.Spec.HostUsers, p.Spec.HostNetwork = &no, true },
			want: []string{"UserNamespacesHostNetworkSupport"}},
		{name: "a RestartAllContainers rule", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{Action: corev1.ContainerRestartRuleActionRestartAllContainers}}
		}, want: []string{"RestartAllContainersOnContainerExits"}},
		{name: "bind mount options", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "mem", MountPath: "/m", BindMountOptions: []string{"ro"}}}
		}, want: []string{"VolumeBindMountOptions"}},
		{name: "pod-level resources resized: the node has it", update: func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
		}},
		{name: "a non-sidecar init container resized", update: func(p *corev1.Pod) {
			p.Spec.InitContainers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, want: []string{"InPlacePodVerticalScalingInitContainers"}},
		{name: "a memory-backed emptyDir resized", update: func(p *corev1.Pod) {
			p.Spec.Volumes[0].EmptyDir.SizeLimit = new(resource.MustParse("128Mi"))
		}, want: []string{"InPlacePodVerticalScalingMemoryBackedVolumes"}},
		{name: "an update that removes an init container is no in-place update", update: func(p *corev1.Pod) { p.Spec.InitContainers = nil }},
		{name: "an update that changes nothing the features name", update: func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, previous := base(), (*corev1.Pod)(nil)
			if tt.pod != nil {
				tt.pod(pod)
			}
			if tt.update != nil {
				previous = base()
				tt.update(pod)
			}
			got, err := MissingFeatures(pod, previous, DeclaredFeatures(FeatureConfig{UserNamespaces: tt.userNamespaces}))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("missing %v, want %v", got, tt.want)
			}
		})
	}
}
