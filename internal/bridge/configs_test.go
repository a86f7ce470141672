package bridge_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/test/poll"
)

// A pod on n1 that mounts a Secret and takes an env var from a ConfigMap
// runs with both: the bridge copied the ConfigMap to the bus and the
// Secret sealed for n1 alone (n2, whose pods do not use it, has no copy
// it could open). A change of the Secret reaches the pod's volume. Its
// service account token (the default projection) is one the API server
// issued for that pod, and the API server takes it.
func TestConfigMapsSecretsAndTokensOfABridgedPod(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "n1", "n2")
	ctx := t.Context()
	for _, name := range []string{"n1", "n2"} {
		f.schedulable(t, name)
	}
	core := f.cp.Client.CoreV1()
	if _, err := core.Secrets(metav1.NamespaceDefault).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"token": "s3cret-v1"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := core.ConfigMaps(metav1.NamespaceDefault).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"greeting": "hello"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := sleeper()
	spec.AutomountServiceAccountToken = nil // the default: kube-api-access-*
	spec.NodeSelector = map[string]string{corev1.LabelHostname: "n1"}
	spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "creds", MountPath: "/etc/creds"}}
	spec.Containers[0].Env = []corev1.EnvVar{{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "greeting"},
	}}}
	reader := f.runPod(t, "reader", spec)
	read := func(want string) {
		t.Helper()
		var out string
		var err error
		poll.Until(t, time.Minute, func() string { return fmt.Sprintf("the pod to read %q (last %q, %v)", want, out, err) }, func() bool {
			out, err = f.cp.Kubectl(ctx, "exec", "reader", "--", "sh", "-c", "echo $GREETING $(cat /etc/creds/token)")
			return err == nil && strings.TrimSpace(out) == want
		})
	}
	read("hello s3cret-v1")

	sealedFor := map[string]bool{}
	stored, err := f.jetlet.SealedSecrets(ctx, "*.default.creds")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stored {
		sealedFor[s.Node] = true
		if strings.Contains(s.Sealed, "s3cret") {
			t.Errorf("the stored Secret of %s holds the value in the clear", s.Node)
		}
	}
	if !sealedFor["n1"] || sealedFor["n2"] || len(stored) != 1 {
		t.Errorf("Secret creds sealed for %v, want n1 alone", sealedFor)
	}
	if cms, err := f.jetlet.ConfigMaps(ctx, "default.settings"); err != nil || len(cms) != 1 || cms[0].Data["greeting"] != "hello" {
		t.Errorf("ConfigMap settings on the bus: %v, %v", cms, err)
	}
	if strings.Contains(f.bridge.Logs(), "s3cret") {
		t.Error("the bridge logged the Secret's value")
	}

	// The token: bound to this pod, valid, with the cluster's CA and the
	// namespace beside it.
	sa := "/var/run/secrets/kubernetes.io/serviceaccount"
	token, err := f.cp.Kubectl(ctx, "exec", "reader", "--", "cat", sa+"/token")
	if err != nil {
		t.Fatal(err)
	}
	review, err := f.cp.Client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := review.Status; !st.Authenticated || st.User.Username != "system:serviceaccount:default:default" || !slices.Contains(st.User.Extra["authentication.kubernetes.io/pod-uid"], string(reader.UID)) {
		t.Errorf("the pod's token reviewed: %+v, want the default service account's, bound to pod %s", st, reader.UID)
	}
	if out, err := f.cp.Kubectl(ctx, "exec", "reader", "--", "sh", "-c", "cat "+sa+"/namespace; grep -c 'BEGIN CERTIFICATE' "+sa+"/ca.crt"); err != nil || out != "default1\n" {
		t.Errorf("the service account's namespace and CA: %q, %v", out, err)
	}
	if strings.Contains(f.bridge.Logs(), token) {
		t.Error("the bridge logged the pod's token")
	}

	// A change of the Secret reaches the pod.
	if _, err := core.Secrets(metav1.NamespaceDefault).Update(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: metav1.NamespaceDefault}, StringData: map[string]string{"token": "s3cret-v2"},
	}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	read("hello s3cret-v2")
}
