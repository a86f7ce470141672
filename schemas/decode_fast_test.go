package schemas

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeApply checks decodeApply, DecodeIntent's one pass, against
// decodeChecking, the three passes it stands in for: whatever the one pass
// accepts, the three accept too, with the same intent.
func FuzzDecodeApply(f *testing.F) {
	for _, dir := range []string{"valid", "invalid"} {
		files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	// benchIntent and what the one pass must not let through: each is one
	// small change away from an intent both accept.
	body := string(benchIntent)
	f.Add(benchIntent)
	f.Add(marshalledIntent(f))
	for _, change := range [][2]string{
		{`"image": "nginx:1.27"`, `"Image": "nginx:1.27"`},
		{`"image": "nginx:1.27"`, `"image": "nginx:1.27", "image": "nginx:1.28"`},
		{`"image": "nginx:1.27"`, `"image": "nginx:1.27", "imageX": "x"`},
		{`"image": "nginx:1.27"`, `"image": null`},
		{`"image": "nginx:1.27"`, `"image": "nginx:\xff"`},
		{`"image": "nginx:1.27"`, `"image": 7`},
		{`"containerPort": 8080`, `"containerPort": 8080.0`},
		{`"containerPort": 8080`, `"containerPort": 8e3`},
		{`"containerPort": 8080`, `"containerPort": "8080"`},
		{`"containerPort": 8080`, `"containerPort": 99999999999`},
		{`"periodSeconds": 5`, `"periodSeconds": null`},
		{`"periodSeconds": 5`, `"periodSeconds": -0`},
		{`"cpu": "100m"`, `"cpu": 0.1`},
		{`"cpu": "100m"`, `"cpu": "1e400"`},
		{`"port": "http"`, `"port": 8080`},
		{`"labels": {`, `"labels": {"x": null, `},
		{`"emptyDir": {}`, `"emptyDir": null`},
		{`"emptyDir": {}`, `"emptyDir": []`},
		{`"metadata": {`, `"metadata": {"creationTimestamp": null, `},
		{`"metadata": {`, `"metadata": {"deletionTimestamp": null, `},
		{`"labels": {"app": "web", "tier": "frontend"}`, `"labels": null`},
		{`"cpu": "500m"`, `"cpu": null`},
		{`"cpu": "100m"`, `"cpu": null`},
		{`"port": "http"`, `"port": null`},
		{`"args": ["-g", "daemon off;"]`, `"args": ["-g", null]`},
		{`"args": ["-g", "daemon off;"]`, `"args": null`},
		{`"resources": {`, `"resizePolicy": null, "resources": {`},
		{`"metadata": {`, `"metadata": {"creationTimestamp": "2025-03-01T10:00:00Z", `},
		{`"revision": 3`, `"revision": 3, "Pod": {}`},
		{`"op": "apply"`, `"op": "delete"`},
		{`"op": "apply"`, `"op": "Apply"`},
		{`"args": ["-g", "daemon off;"]`, `"args": ["-g", "> /dev/null"]`},
		{`"restartPolicy": "Always"`, `"restartPolicy": "Always", "status": {"phase": null}`},
	} {
		f.Add([]byte(strings.Replace(body, change[0], change[1], 1)))
	}
	want := IntentTarget{Node: "n1", UID: "3f0c7c1e-8d2a-4b7e-9a51-2c4d6e8f0a1b"}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast := decodeApply(body, want)
		if fast == nil {
			return
		}
		slow, err := decodeChecking(body, want)
		if err != nil {
			t.Fatalf("one pass accepts what the checking passes refuse: %v\n%s", err, body)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("one pass and checking passes decode differently:\n%+v\n%+v\n%s", fast, slow, body)
		}
	})
}

// TestDecodeApplyTakesTheCommonCase keeps the one pass in use: a typical
// apply intent, one with "/dev/null" in a string, and one encoding/json made
// of a PodIntent, with a null creationTimestamp, must not need the checking
// passes.
func TestDecodeApplyTakesTheCommonCase(t *testing.T) {
	want := IntentTarget{Node: "n1", UID: "3f0c7c1e-8d2a-4b7e-9a51-2c4d6e8f0a1b"}
	devNull := strings.Replace(string(benchIntent), `"daemon off;"`, `"daemon off; >/dev/null"`, 1)
	for _, body := range []string{string(benchIntent), devNull, string(marshalledIntent(t))} {
		if decodeApply([]byte(body), want) == nil {
			t.Errorf("one pass refuses a valid apply intent:\n%s", body)
		}
	}
}

// marshalledIntent is benchIntent decoded and encoded again by encoding/json,
// as a scheduler written in Go would send it; with the older k8s.io/api
// versions, its zero creationTimestamp is a null.
func marshalledIntent(t testing.TB) []byte {
	in, err := DecodeIntent(benchIntent, IntentTarget{Node: "n1", UID: "3f0c7c1e-8d2a-4b7e-9a51-2c4d6e8f0a1b"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Replace(body, []byte(`"metadata":{`), []byte(`"metadata":{"creationTimestamp":null,`), 1)
}
