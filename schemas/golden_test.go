package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const goldenUID = "3f0c7c1e-8d2a-4b7e-9a51-2c4d6e8f0a1b"

// invalidExamples says, for every file in testdata/invalid, which field the Go
// validator must name first and of what kind. schemaBlind is set, with the
// reason, for the few rules a JSON Schema cannot see: the schema must accept
// those files (so this list stays honest), and only DecodeIntent rejects them.
var invalidExamples = map[string]struct {
	field       string
	kind        ErrorKind
	subjectUID  string // the subject's uid when it is not the body's
	schemaBlind string
}{
	"not-json":                        {"", ErrMalformed, "", ""},
	"top-level-array":                 {"", ErrMalformed, "", ""},
	"unknown-envelope-field":          {"priority", ErrUnsupported, "", ""},
	"wrong-api-version":               {"apiVersion", ErrInvalid, "", ""},
	"wrong-kind":                      {"kind", ErrInvalid, "", ""},
	"bad-op":                          {"op", ErrInvalid, "", ""},
	"revision-zero":                   {"revision", ErrInvalid, "", ""},
	"negative-grace-period":           {"gracePeriodSeconds", ErrInvalid, "", ""},
	"missing-pod":                     {"pod", ErrInvalid, "", ""},
	"missing-spec":                    {"pod.spec", ErrInvalid, "", ""},
	"missing-uid":                     {"pod.metadata.uid", ErrInvalid, "", ""},
	"bad-uid":                         {"pod.metadata.uid", ErrInvalid, "", ""},
	"uid-mismatch":                    {"pod.metadata.uid", ErrInvalid, "another-uid", "the subject is not part of the body"},
	"missing-namespace":               {"pod.metadata.namespace", ErrInvalid, "", ""},
	"bad-name":                        {"pod.metadata.name", ErrInvalid, "", ""},
	"bad-namespace":                   {"pod.metadata.namespace", ErrInvalid, "", ""},
	"label-value":                     {"pod.metadata.labels[tier]", ErrInvalid, "", ""},
	"pod-kind":                        {"pod.kind", ErrInvalid, "", ""},
	"unknown-container-field":         {"pod.spec.containers[0].imagePullPolcy", ErrUnsupported, "", ""},
	"container-name":                  {"pod.spec.containers[0].name", ErrInvalid, "", ""},
	"duplicate-container-name":        {"pod.spec.containers[0].name", ErrInvalid, "", "uniqueness across two lists"},
	"missing-image":                   {"pod.spec.containers[0].image", ErrInvalid, "", ""},
	"no-containers":                   {"pod.spec.containers", ErrInvalid, "", ""},
	"restart-policy":                  {"pod.spec.restartPolicy", ErrInvalid, "", ""},
	"image-pull-policy":               {"pod.spec.containers[0].imagePullPolicy", ErrInvalid, "", ""},
	"probe-two-handlers":              {"pod.spec.containers[0].livenessProbe", ErrInvalid, "", ""},
	"probe-no-handler":                {"pod.spec.containers[0].readinessProbe", ErrInvalid, "", ""},
	"liveness-success-threshold":      {"pod.spec.containers[0].livenessProbe.successThreshold", ErrInvalid, "", ""},
	"port-range":                      {"pod.spec.containers[0].ports[0].containerPort", ErrInvalid, "", ""},
	"port-zero":                       {"pod.spec.containers[0].ports[0].containerPort", ErrInvalid, "", ""},
	"port-protocol":                   {"pod.spec.containers[0].ports[0].protocol", ErrInvalid, "", ""},
	"port-wrong-type":                 {"pod.spec.containers[0].ports[0].containerPort", ErrInvalid, "", ""},
	"probe-port-name":                 {"pod.spec.containers[0].livenessProbe.httpGet.port", ErrInvalid, "", ""},
	"volume-pvc":                      {"pod.spec.volumes[0].persistentVolumeClaim", ErrUnsupported, "", ""},
	"volume-two-sources":              {"pod.spec.volumes[0]", ErrInvalid, "", ""},
	"volume-name":                     {"pod.spec.volumes[0].name", ErrInvalid, "", ""},
	"duplicate-volume-name":           {"pod.spec.volumes[1].name", ErrInvalid, "", "uniqueness of names in a list"},
	"mount-unknown-volume":            {"pod.spec.containers[0].volumeMounts[0].name", ErrInvalid, "", "a reference to another list"},
	"mount-relative-path":             {"pod.spec.containers[0].volumeMounts[0].mountPath", ErrInvalid, "", ""},
	"ephemeral-containers":            {"pod.spec.ephemeralContainers", ErrUnsupported, "", ""},
	"volume-devices":                  {"pod.spec.containers[0].volumeDevices", ErrUnsupported, "", ""},
	"env-name":                        {"pod.spec.containers[0].env[0].name", ErrInvalid, "", ""},
	"bad-quantity":                    {"pod.spec.containers[0].resources.limits[cpu]", ErrInvalid, "", ""},
	"extended-resource":               {"pod.spec.containers[0].resources.limits[nvidia.com/gpu]", ErrUnsupported, "", ""},
	"requests-over-limits":            {"pod.spec.containers[0].resources.requests[memory]", ErrInvalid, "", "a comparison of two quantities"},
	"node-name-mismatch":              {"pod.spec.nodeName", ErrInvalid, "", "the subject is not part of the body"},
	"restart-rules-without-policy":    {"pod.spec.containers[0].restartPolicy", ErrInvalid, "", ""},
	"host-alias-ip":                   {"pod.spec.hostAliases[0].ip", ErrInvalid, "", "an IP address's syntax"},
	"emptydir-disk-size-limit":        {"pod.spec.volumes[0].emptyDir.sizeLimit", ErrUnsupported, "", ""},
	"ephemeral-storage-limit":         {"pod.spec.containers[0].resources.limits[ephemeral-storage]", ErrUnsupported, "", ""},
	"pod-resources-ephemeral-storage": {"pod.spec.resources.requests[ephemeral-storage]", ErrUnsupported, "", ""},
	"pod-resources-under-containers":  {"pod.spec.resources.requests[memory]", ErrInvalid, "", "a sum over the containers compared with the pod's"},
	"runtime-class":                   {"pod.spec.runtimeClassName", ErrUnsupported, "", ""},
	"delete-missing-uid":              {"pod.metadata.uid", ErrInvalid, "", ""},
	"delete-unknown-metadata-field":   {"pod.metadata.colour", ErrUnsupported, "", ""},
}

var podIntentSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	return compileSchema(SchemaPodIntent)
})

func compileSchema(name string) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(JSONSchema(name)))
	if err != nil {
		return nil, err
	}
	url := SchemaIDBase + name + ".schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// schemaAccepts validates body against schema; a body that is not JSON is
// refused like any other.
func schemaAccepts(t *testing.T, s *jsonschema.Schema, body []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

func readExamples(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in testdata/%s: %v", dir, err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = b
	}
	return out
}

func targetFor(body []byte, subjectUID string) IntentTarget {
	if subjectUID == "" {
		subjectUID = goldenUID
		if uid := PeekEnvelope(body).UID; uid != "" {
			subjectUID = uid
		}
	}
	return IntentTarget{Node: "n1", UID: subjectUID}
}

func TestGoldenValidExamples(t *testing.T) {
	schema, err := podIntentSchema()
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range readExamples(t, "valid") {
		t.Run(name, func(t *testing.T) {
			if err := schemaAccepts(t, schema, body); err != nil {
				t.Errorf("JSON Schema refuses a valid example: %v", err)
			}
			intent, err := DecodeIntent(body, targetFor(body, ""))
			if err != nil {
				t.Fatalf("DecodeIntent: %v", err)
			}
			// What DecodeIntent returns (defaulted) is still a valid intent.
			out, err := json.Marshal(intent)
			if err != nil {
				t.Fatal(err)
			}
			if err := schemaAccepts(t, schema, out); err != nil {
				t.Errorf("JSON Schema refuses the decoded intent: %v\n%s", err, out)
			}
			if _, err := DecodeIntent(out, targetFor(out, "")); err != nil {
				t.Errorf("the decoded intent does not decode again: %v", err)
			}
		})
	}
}

func TestGoldenInvalidExamples(t *testing.T) {
	schema, err := podIntentSchema()
	if err != nil {
		t.Fatal(err)
	}
	examples := readExamples(t, "invalid")
	if len(examples) != len(invalidExamples) {
		t.Errorf("%d files in testdata/invalid but %d rows in invalidExamples", len(examples), len(invalidExamples))
	}
	for name, body := range examples {
		t.Run(name, func(t *testing.T) {
			want, ok := invalidExamples[name]
			if !ok {
				t.Fatalf("testdata/invalid/%s.json has no row in invalidExamples", name)
			}
			_, err := DecodeIntent(body, targetFor(body, want.subjectUID))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("DecodeIntent accepted it (err %v)", err)
			}
			if ve.Field != want.field || ve.Kind != want.kind {
				t.Errorf("first problem %q (%s), want field %q (%s); all: %v", ve.Field, ve.Kind, want.field, want.kind, err)
			}
			if !errors.Is(err, want.kind) {
				t.Errorf("errors.Is(err, %s) is false: %v", want.kind, err)
			}
			serr := schemaAccepts(t, schema, body)
			switch {
			case want.schemaBlind == "" && serr == nil:
				t.Errorf("JSON Schema accepts what DecodeIntent refuses: %v", err)
			case want.schemaBlind != "" && serr != nil:
				t.Errorf("marked schema-blind (%s) but the JSON Schema refuses it too: %v", want.schemaBlind, serr)
			}
		})
	}
}
