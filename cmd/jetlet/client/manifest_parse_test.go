package client

import (
	"encoding/json"
	"strings"
	"testing"

	jc "github.com/jetlet/jetlet/client"
)

func TestParseManifest(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []string // label of each document
		err   string
	}{
		{"one pod", podYAML("a", "app"), []string{"pod/default/a"}, ""},
		{"documents", "---\n" + podYAML("a", "app") + "--- # next\n" + podYAML("b", "app") + "---\n", []string{"pod/default/a", "pod/default/b"}, ""},
		{"json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j","namespace":"x"},"spec":{}}`, []string{"pod/x/j"}, ""},
		{"list", `{"apiVersion":"v1","kind":"List","items":[{"kind":"Pod","metadata":{"name":"a"}},{"kind":"PodIntent","apiVersion":"jetlet.dev/v1","pod":{"metadata":{"name":"b"}}}]}`,
			[]string{"pod/default/a", "pod/default/b"}, ""},
		{"pod apiVersion", "apiVersion: v2\nkind: Pod\n", nil, `apiVersion "v2": a Pod is v1`},
		{"intent without pod", "kind: PodIntent\n", nil, "a PodIntent needs a pod object"},
		{"list item", `{"kind":"List","items":[1]}`, nil, "item 1: not an object"},
		{"scalar", "hello\n", nil, "want an object (a Pod or a PodIntent), got a string"},
		{"second document", podYAML("a", "app") + "---\nkind: Service\n", nil, `f.yaml, document 2: kind "Service"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := parseManifest([]byte(tc.input), "f.yaml")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range docs {
				got = append(got, d.label())
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("documents %v, want %v", got, tc.want)
			}
		})
	}
}

func TestManifestKeepsNumbersAndUnknownFields(t *testing.T) {
	docs, err := parseManifest([]byte(`apiVersion: jetlet.dev/v1
kind: PodIntent
revision: 12
pod:
  metadata: {name: a}
  spec:
    containers:
    - name: app
      image: busybox
      bogus: 1
      resources: {limits: {memory: 1000000000}}
`), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := docs[0]
	if !d.hasRevision() || d.revision() != 12 {
		t.Errorf("revision %v %d", d.hasRevision(), d.revision())
	}
	body, _ := d.body()
	if !strings.Contains(string(body), `"memory":1000000000`) {
		t.Errorf("a number changed form: %s", body)
	}
	d.metadata()["uid"] = "u1"
	body, _ = d.body()
	reasons := jc.ValidateIntent(body, "n1", "u1")
	if len(reasons) != 1 || !strings.Contains(reasons[0], "pod.spec.containers[0].bogus") {
		t.Errorf("an unknown field must be reported, got %v", reasons)
	}
	var env map[string]any
	_ = json.Unmarshal(body, &env)
	if env["kind"] != "PodIntent" {
		t.Errorf("envelope %v", env)
	}
}
