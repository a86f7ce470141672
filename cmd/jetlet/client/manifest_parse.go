package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/jetlet/jetlet/schemas"
)

// document is one pod (or ConfigMap or Secret) of a manifest, kept as generic JSON so that every field
// reaches schemas.DecodeIntent as the user wrote it (a typed round trip would
// drop unknown fields instead of reporting them).
type document struct {
	// where says where it came from: "web.yaml, document 2".
	where string
	// envelope is the PodIntent around the pod; for a bare Pod it is built
	// here with only apiVersion and kind.
	envelope map[string]any
	// pod is envelope["pod"].
	pod map[string]any
	// config is a ConfigMap or a Secret (kind says which) instead of a
	// pod: envelope and pod are nil.
	config map[string]any
}

// metadata returns the pod's metadata object, creating it when absent.
func (d *document) metadata() map[string]any {
	md, ok := d.pod["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		d.pod["metadata"] = md
	}
	return md
}

// str reads a string field of m ("" when absent or not a string).
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func (d *document) namespace() string { return str(d.metadata(), "namespace") }
func (d *document) name() string      { return str(d.metadata(), "name") }
func (d *document) uid() string       { return str(d.metadata(), "uid") }

// nodeName is the pod's spec.nodeName, if it names one.
func (d *document) nodeName() string {
	spec, _ := d.pod["spec"].(map[string]any)
	return str(spec, "nodeName")
}

// op is the intent's op, apply when absent.
func (d *document) op() schemas.Op {
	if op := str(d.envelope, "op"); op != "" {
		return schemas.Op(op)
	}
	return schemas.OpApply
}

// hasRevision reports whether the document sets the intent's revision.
func (d *document) hasRevision() bool {
	_, ok := d.envelope["revision"]
	return ok
}

// revision reads the revision the document sets (0 when absent or not an
// integer).
func (d *document) revision() int64 {
	n, _ := d.envelope["revision"].(json.Number)
	i, _ := n.Int64()
	return i
}

// label names the pod for messages: pod/NAMESPACE/NAME.
func (d *document) label() string {
	ns := d.namespace()
	if ns == "" {
		ns = "default"
	}
	name := d.name()
	if name == "" {
		name = "<no name>"
	}
	return "pod/" + ns + "/" + name
}

// body is the intent as it will be published.
func (d *document) body() ([]byte, error) { return json.Marshal(d.envelope) }

// parseManifest reads Kubernetes Pods, PodIntents, ConfigMaps and Secrets
// from YAML (several
// documents separated by ---) or JSON, including v1 Lists of them. source
// names the input in messages.
func parseManifest(data []byte, source string) ([]*document, error) {
	var docs []*document
	chunks := splitYAML(data)
	for i, chunk := range chunks {
		where := source
		if len(chunks) > 1 {
			where = fmt.Sprintf("%s, document %d", source, i+1)
		}
		js, err := yaml.YAMLToJSON(chunk)
		if err != nil {
			return nil, fmt.Errorf("%s: not YAML or JSON: %v", where, err)
		}
		js = bytes.TrimSpace(js)
		if len(js) == 0 || string(js) == "null" {
			continue // an empty document, or only comments
		}
		// Numbers stay json.Number: 1000000000 must not come back as 1e+09.
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.UseNumber()
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			return nil, fmt.Errorf("%s: want an object (a Pod or a PodIntent), got %s", where, firstWord(js))
		}
		more, err := documentsOf(obj, where)
		if err != nil {
			return nil, err
		}
		docs = append(docs, more...)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no pod in it", source)
	}
	return docs, nil
}

// documentsOf sorts one object by its kind.
func documentsOf(obj map[string]any, where string) ([]*document, error) {
	kind := str(obj, "kind")
	switch kind {
	case "Pod":
		if v := str(obj, "apiVersion"); v != "" && v != "v1" {
			return nil, fmt.Errorf("%s: apiVersion %q: a Pod is v1", where, v)
		}
		env := map[string]any{"apiVersion": schemas.APIVersion, "kind": schemas.KindPodIntent, "pod": obj}
		return []*document{{where: where, envelope: env, pod: obj}}, nil
	case schemas.KindPodIntent:
		pod, ok := obj["pod"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: a PodIntent needs a pod object", where)
		}
		return []*document{{where: where, envelope: obj, pod: pod}}, nil
	case kindConfigMap, kindSecret:
		if v := str(obj, "apiVersion"); v != "" && v != "v1" {
			return nil, fmt.Errorf("%s: apiVersion %q: a %s is v1", where, v, kind)
		}
		return []*document{{where: where, config: obj}}, nil
	case "List", "PodList", "ConfigMapList", "SecretList":
		items, _ := obj["items"].([]any)
		var out []*document
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s, item %d: not an object", where, i+1)
			}
			more, err := documentsOf(m, fmt.Sprintf("%s, item %d", where, i+1))
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		}
		return out, nil
	case "":
		return nil, fmt.Errorf("%s: no kind; want kind: Pod (apiVersion: v1) or kind: PodIntent (apiVersion: %s)", where, schemas.APIVersion)
	}
	return nil, fmt.Errorf("%s: kind %q is not something jetlet runs; want Pod, PodIntent, ConfigMap or Secret", where, kind)
}

// splitYAML splits a YAML stream at its "---" document separators.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), len(data)+1)
	for sc.Scan() {
		line := sc.Text()
		if line == "---" || strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "---\t") {
			docs = append(docs, bytes.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	return append(docs, cur.Bytes())
}

func firstWord(js []byte) string {
	switch js[0] {
	case '[':
		return "a list"
	case '"':
		return "a string"
	}
	return "a scalar"
}
