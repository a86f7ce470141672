package reconcile

import (
	"bytes"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/pullmanager"
	"github.com/jetlet/jetlet/runtime/credentials"
)

// pullCredential is one credential to pull an image with and where it
// came from: secret is the pod's pull secret that gave it (its hash, never
// its value), nil for the node's (kubelet's TrackedAuthConfig).
type pullCredential struct {
	auth   *runtimeapi.AuthConfig
	secret *pullmanager.ImagePullSecret
}

// recorded is what the pull records keep of a pull with c (nil: an
// anonymous pull): a pod secret's coordinates, or NodePodsAccessible for
// the node's credentials and for none, as kubelet's trackedToImagePullCreds.
func (c *pullCredential) recorded() *pullmanager.ImagePullCredentials {
	if c == nil || c.secret == nil {
		return &pullmanager.ImagePullCredentials{NodePodsAccessible: true}
	}
	return &pullmanager.ImagePullCredentials{KubernetesSecrets: []pullmanager.ImagePullSecret{*c.secret}}
}

// podPullSecrets are the pod's own credentials among creds.
func podPullSecrets(creds []pullCredential) []pullmanager.ImagePullSecret {
	var out []pullmanager.ImagePullSecret
	for _, c := range creds {
		if c.secret != nil {
			out = append(out, *c.secret)
		}
	}
	return out
}

// pullCredentials are the credentials to pull image with, in kubelet's order
// (MakeDockerKeyring's union): the pod's imagePullSecrets first, then the
// node's (Config.Credentials). Matching an image to registry keys is
// runtime/credentials' keyring, the one the node's file goes through.
func (s *podOperation) pullCredentials(image string) []pullCredential {
	var out []pullCredential
	for _, sec := range s.pullSecrets() {
		for _, auth := range sec.keyring.Lookup(image) {
			out = append(out, pullCredential{auth: auth, secret: &pullmanager.ImagePullSecret{
				UID: string(sec.secret.UID), Namespace: sec.secret.Namespace, Name: sec.secret.Name,
				CredentialHash: pullmanager.CredentialHash(auth)}})
		}
	}
	for _, auth := range s.m.cfg.Credentials.Lookup(image) {
		out = append(out, pullCredential{auth: auth})
	}
	return out
}

// pullSecret is one of the pod's imagePullSecrets and its keyring.
type pullSecret struct {
	secret  *corev1.Secret
	keyring *credentials.Keyring
}

// pullSecrets reads the pod's imagePullSecrets, in the pod's order.
// As kubelet, a Secret that cannot be read is skipped with a warning (the
// pull may still work), as is one that is not of type dockerconfigjson or
// dockercfg or whose content does not parse; nothing is said of its content.
func (s *podOperation) pullSecrets() []pullSecret {
	if len(s.pod.Spec.ImagePullSecrets) == 0 || s.m.cfg.Objects == nil {
		return nil
	}
	objs := s.m.podObjects(s.pod)
	var out []pullSecret
	for _, ref := range s.pod.Spec.ImagePullSecrets {
		sec, err := objs.secret(ref.Name, false)
		if err == nil {
			var k *credentials.Keyring
			if k, err = pullSecretKeyring(sec); k != nil {
				out = append(out, pullSecret{secret: sec, keyring: k})
			}
		}
		if err != nil {
			s.m.log.Warn().Str("pod", s.pod.Namespace+"/"+s.pod.Name).Str("secret", ref.Name).Err(err).
				Msg("unable to use an image pull secret; the image pull may not succeed")
		}
	}
	return out
}

// pullSecretKeyring is the keyring of a Secret of type dockerconfigjson
// (Docker's config.json) or dockercfg (its "auths" alone); nil for another
// type. Parse's errors name registry keys, never a value.
func pullSecretKeyring(sec *corev1.Secret) (*credentials.Keyring, error) {
	switch sec.Type {
	case corev1.SecretTypeDockerConfigJson:
		return credentials.Parse(sec.Data[corev1.DockerConfigJsonKey])
	case corev1.SecretTypeDockercfg:
		cfg := bytes.Join([][]byte{[]byte(`{"auths":`), sec.Data[corev1.DockerConfigKey], []byte(`}`)}, nil)
		return credentials.Parse(cfg)
	}
	return nil, nil
}
