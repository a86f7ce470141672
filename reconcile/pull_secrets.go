package reconcile

import (
	"bytes"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/credentials"
)

// pullCredentials are the credentials to pull image with, in kubelet's order
// (MakeDockerKeyring's union): the pod's imagePullSecrets first, then the
// node's (Config.Credentials). Matching an image to registry keys is
// runtime/credentials' keyring, the one the node's file goes through.
func (s *podOperation) pullCredentials(image string) []*runtimeapi.AuthConfig {
	var out []*runtimeapi.AuthConfig
	for _, k := range s.pullSecretKeyrings() {
		out = append(out, k.Lookup(image)...)
	}
	return append(out, s.m.cfg.Credentials.Lookup(image)...)
}

// pullSecretKeyrings reads the pod's imagePullSecrets, in the pod's order.
// As kubelet, a Secret that cannot be read is skipped with a warning (the
// pull may still work), as is one that is not of type dockerconfigjson or
// dockercfg or whose content does not parse; nothing is said of its content.
func (s *podOperation) pullSecretKeyrings() []*credentials.Keyring {
	if len(s.pod.Spec.ImagePullSecrets) == 0 || s.m.cfg.Objects == nil {
		return nil
	}
	objs := s.m.podObjects(s.pod)
	var out []*credentials.Keyring
	for _, ref := range s.pod.Spec.ImagePullSecrets {
		sec, err := objs.secret(ref.Name, false)
		if err == nil {
			var k *credentials.Keyring
			if k, err = pullSecretKeyring(sec); k != nil {
				out = append(out, k)
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
