package bridge

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodConfigRefs(t *testing.T) {
	pod := &corev1.Pod{}
	pod.Namespace = "ns"
	pod.Spec = corev1.PodSpec{
		Volumes: []corev1.Volume{
			{VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-vol"}}}},
			{VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s-vol"}}},
			{VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s-proj"}}},
			}}}},
			{VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
		InitContainers: []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s-init"}}}}}},
		Containers: []corev1.Container{{
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-from"}}}},
			Env: []corev1.EnvVar{
				{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-vol"}, Key: "k"}}},
				{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s-env"}, Key: "k"}}},
				{Name: "C", Value: "plain"},
			},
		}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-debug"}}}},
		}}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "s-pull"}},
	}
	var got []string
	for _, r := range podConfigRefs(pod) {
		kind := "configmap"
		if r.secret {
			kind = "secret"
		}
		got = append(got, kind+"/"+r.namespace+"/"+r.name)
	}
	slices.Sort(got)
	want := []string{"configmap/ns/cm-debug", "configmap/ns/cm-from", "configmap/ns/cm-vol", "configmap/ns/kube-root-ca.crt",
		"secret/ns/s-env", "secret/ns/s-init", "secret/ns/s-proj", "secret/ns/s-pull", "secret/ns/s-vol"}
	if !slices.Equal(got, want) {
		t.Errorf("podConfigRefs = %v, want %v (each once)", got, want)
	}
}
