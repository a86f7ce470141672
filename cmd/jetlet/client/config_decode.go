package client

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jetlet/jetlet/schemas"
)

// Kinds of the configuration objects jetlet stores in its buckets
// (docs/contract.md section 11).
const (
	kindConfigMap = "ConfigMap"
	kindSecret    = "Secret"
)

// configObject is one ConfigMap or Secret to store, decoded, defaulted and
// validated as the API server would: exactly one of configMap and secret is
// set.
type configObject struct {
	where     string // where it came from, for messages
	configMap *corev1.ConfigMap
	secret    *secretValue
}

// label names the object for messages: configmap/NAMESPACE/NAME or
// secret/NAMESPACE/NAME.
func (o *configObject) label() string {
	if o.configMap != nil {
		return configLabel(kindConfigMap, o.configMap.Namespace, o.configMap.Name)
	}
	return o.secret.String()
}

func configLabel(kind, namespace, name string) string {
	return strings.ToLower(kind) + "/" + namespace + "/" + name
}

// secretValue holds a Secret whose values must never be printed: fmt,
// encoding/json and zerolog see only its namespace and name. Only sealing it
// and a --dry-run print (the user's own terminal) read secret.Data.
type secretValue struct{ secret *corev1.Secret }

func (v *secretValue) String() string {
	return configLabel(kindSecret, v.secret.Namespace, v.secret.Name)
}

func (v *secretValue) GoString() string { return v.String() + " (values not shown)" }

func (v *secretValue) MarshalJSON() ([]byte, error) {
	return json.Marshal(v.String() + " (values not shown)")
}

func (v *secretValue) MarshalZerologObject(e *zerolog.Event) {
	e.Str("namespace", v.secret.Namespace).Str("name", v.secret.Name)
}

// decodeConfig turns a ConfigMap or Secret document of a manifest into an
// object to store: fields the API server does not know are refused, the
// namespace defaults to "default", a Secret's stringData is merged into its
// data and its type defaults to Opaque, and the whole is validated. The
// errors never quote a value (a Secret's would leak).
func decodeConfig(d *document) (*configObject, error) {
	js, err := json.Marshal(d.config)
	if err != nil {
		return nil, fmt.Errorf("%s: %s cannot be encoded", d.where, str(d.config, "kind"))
	}
	kind := str(d.config, "kind")
	invalid := func(label, reason string) error {
		return &invalidIntentError{d.where, label, []string{reason}}
	}
	md, _ := d.config["metadata"].(map[string]any)
	label := configLabel(kind, cmp.Or(str(md, "namespace"), "default"), cmp.Or(str(md, "name"), "<no name>"))
	if kind == kindConfigMap {
		var cm corev1.ConfigMap
		if err := decodeStrict(js, &cm); err != nil {
			return nil, invalid(label, err.Error())
		}
		return checkedConfig(d.where, &cm, nil)
	}
	var s corev1.Secret
	if err := decodeStrict(js, &s); err != nil {
		return nil, invalid(label, err.Error())
	}
	return checkedConfig(d.where, nil, &s)
}

// decodeStrict decodes JSON into v, refusing unknown fields as the API
// server's strict field validation does. Its errors name fields and types
// (json: unknown field "x", illegal base64 data at input byte 4), never
// the values.
func decodeStrict(js []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// checkedConfig defaults and validates a ConfigMap or a Secret (one of
// them) as the API server would, and returns it ready to store.
func checkedConfig(where string, cm *corev1.ConfigMap, s *corev1.Secret) (*configObject, error) {
	o := &configObject{where: where}
	var reasons []string
	if cm != nil {
		cm.APIVersion, cm.Kind = "v1", kindConfigMap
		cm.Namespace = cmp.Or(cm.Namespace, "default")
		o.configMap = cm
		reasons = append(validateObjectMeta(&cm.ObjectMeta), validateConfigMapData(cm)...)
	} else {
		s.APIVersion, s.Kind = "v1", kindSecret
		s.Namespace = cmp.Or(s.Namespace, "default")
		mergeStringData(s)
		o.secret = &secretValue{s}
		reasons = append(validateObjectMeta(&s.ObjectMeta), validateSecretData(s)...)
	}
	if reasons != nil {
		return nil, &invalidIntentError{where, o.label(), reasons}
	}
	return o, nil
}

// mergeStringData does what the API server does with a Secret's
// stringData: each entry replaces the data of its key; the type defaults
// to Opaque.
func mergeStringData(s *corev1.Secret) {
	if len(s.StringData) > 0 && s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
}

// validateObjectMeta checks the name and namespace as the API server does,
// and refuses what jetlet cannot keep (generateName: no server makes the
// name up).
func validateObjectMeta(md *metav1.ObjectMeta) []string {
	var out []string
	switch {
	case md.Name == "" && md.GenerateName != "":
		out = append(out, "metadata.generateName: not supported (no API server makes the name up); give metadata.name")
	case md.Name == "":
		out = append(out, "metadata.name: required")
	default:
		for _, msg := range validation.IsDNS1123Subdomain(md.Name) {
			out = append(out, fmt.Sprintf("metadata.name %q: %s", md.Name, msg))
		}
	}
	for _, msg := range validation.IsDNS1123Label(md.Namespace) {
		out = append(out, fmt.Sprintf("metadata.namespace %q: %s", md.Namespace, msg))
	}
	return out
}

// validateConfigMapData checks a ConfigMap's keys and size as the API
// server does.
func validateConfigMapData(cm *corev1.ConfigMap) []string {
	var out []string
	size := 0
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		out = append(out, validateConfigKey("data", k)...)
		if _, twice := cm.BinaryData[k]; twice {
			out = append(out, fmt.Sprintf("data[%q]: the key is in binaryData too; a key may be in one of them only", k))
		}
		size += len(cm.Data[k])
	}
	for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
		out = append(out, validateConfigKey("binaryData", k)...)
		size += len(cm.BinaryData[k])
	}
	if size > corev1.MaxSecretSize {
		out = append(out, fmt.Sprintf("data: %d bytes; a ConfigMap holds at most %d", size, corev1.MaxSecretSize))
	}
	return out
}

// validateSecretData checks a Secret's keys, size and the keys its type
// requires as the API server does, quoting keys but never a value.
func validateSecretData(s *corev1.Secret) []string {
	var out []string
	size := 0
	for _, k := range slices.Sorted(maps.Keys(s.Data)) {
		out = append(out, validateConfigKey("data", k)...)
		size += len(s.Data[k])
	}
	if size > corev1.MaxSecretSize {
		out = append(out, fmt.Sprintf("data: %d bytes; a Secret holds at most %d", size, corev1.MaxSecretSize))
	}
	need := func(keys ...string) {
		for _, k := range keys {
			if _, ok := s.Data[k]; !ok {
				out = append(out, fmt.Sprintf("data[%q]: required for a Secret of type %s", k, s.Type))
			}
		}
	}
	jsonKey := func(k string) {
		if v, ok := s.Data[k]; ok && !json.Valid(v) {
			out = append(out, fmt.Sprintf("data[%q]: not valid JSON (the content is not shown)", k))
		}
	}
	switch s.Type {
	case corev1.SecretTypeDockerConfigJson:
		need(corev1.DockerConfigJsonKey)
		jsonKey(corev1.DockerConfigJsonKey)
	case corev1.SecretTypeDockercfg:
		need(corev1.DockerConfigKey)
		jsonKey(corev1.DockerConfigKey)
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, pass := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !pass {
			out = append(out, fmt.Sprintf("data: a Secret of type %s needs %q or %q", s.Type, corev1.BasicAuthUsernameKey, corev1.BasicAuthPasswordKey))
		}
	case corev1.SecretTypeSSHAuth:
		need(corev1.SSHAuthPrivateKey)
	case corev1.SecretTypeTLS:
		need(corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			out = append(out, fmt.Sprintf("metadata.annotations[%q]: required for a Secret of type %s", corev1.ServiceAccountNameKey, s.Type))
		}
	}
	return out
}

// validateConfigKey checks one key of a ConfigMap or Secret: what a file
// name in its volume may be.
func validateConfigKey(field, key string) []string {
	var out []string
	for _, msg := range validation.IsConfigMapKey(key) {
		out = append(out, fmt.Sprintf("%s[%q]: not a valid key: %s", field, key, msg))
	}
	return out
}

// objectKey is <namespace>.<name>: a ConfigMap's key in jetlet_configmaps, a
// Secret's after its node in jetlet_secrets (docs/contract.md section 11).
func objectKey(namespace, name string) string { return namespace + "." + name }

// objectRef names a ConfigMap or Secret on the command line: NAMESPACE/NAME,
// or NAME in namespace.
func objectRef(kind, arg, namespace string) (string, string, error) {
	ns, name, found := strings.Cut(strings.TrimPrefix(arg, strings.ToLower(kind)+"/"), "/")
	if !found {
		ns, name = namespace, ns
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%q: want NAMESPACE/NAME", arg)
	}
	if reasons := validateObjectMeta(&metav1.ObjectMeta{Name: name, Namespace: ns}); reasons != nil {
		return "", "", fmt.Errorf("%s %s/%s: %s", strings.ToLower(kind), ns, name, strings.Join(reasons, "; "))
	}
	return ns, name, nil
}

// secretNodes are the nodes a Secret is sealed for: --nodes, else --node.
func secretNodes(node string, nodes []string) ([]string, error) {
	if node != "" && len(nodes) > 0 {
		return nil, fmt.Errorf("give --node or --nodes, not both")
	}
	if node != "" {
		return []string{node}, nil
	}
	var out []string
	for _, n := range nodes {
		if !schemas.ValidNodeName(n) {
			return nil, fmt.Errorf("--nodes: %q is not a node name (a DNS-1123 label)", n)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}
