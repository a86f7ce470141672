package schemas

import "testing"

// benchIntent is what a scheduler typically sends: one container with a
// port, an env var, resources, a probe and a mount, and some labels.
var benchIntent = []byte(`{
  "apiVersion": "jetlet.dev/v1",
  "kind": "PodIntent",
  "op": "apply",
  "revision": 3,
  "pod": {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
      "name": "web-7d4b9c",
      "namespace": "default",
      "uid": "3f0c7c1e-8d2a-4b7e-9a51-2c4d6e8f0a1b",
      "labels": {"app": "web", "tier": "frontend"},
      "annotations": {"example.com/owner": "team-a"}
    },
    "spec": {
      "restartPolicy": "Always",
      "volumes": [{"name": "cache", "emptyDir": {}}],
      "containers": [{
        "name": "app",
        "image": "nginx:1.27",
        "args": ["-g", "daemon off;"],
        "ports": [{"name": "http", "containerPort": 8080}],
        "env": [
          {"name": "MODE", "value": "production"},
          {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
        ],
        "resources": {
          "requests": {"cpu": "100m", "memory": "64Mi"},
          "limits": {"cpu": "500m", "memory": "128Mi"}
        },
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5},
        "volumeMounts": [{"name": "cache", "mountPath": "/var/cache/nginx"}]
      }]
    }
  }
}`)

func BenchmarkDecodeIntent(b *testing.B) { benchDecode(b, benchIntent) }

// BenchmarkDecodeIntentWithNull decodes what a scheduler written in Go may
// send: the typical intent with its defaults and a null creationTimestamp.
func BenchmarkDecodeIntentWithNull(b *testing.B) { benchDecode(b, marshalledIntent(b)) }

func benchDecode(b *testing.B, body []byte) {
	target := IntentTarget{Node: "n1", UID: "3f0c7c1e-8d2a-4b7e-9a51-2c4d6e8f0a1b"}
	if _, err := DecodeIntent(body, target); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeIntent(body, target); err != nil {
			b.Fatal(err)
		}
	}
}
