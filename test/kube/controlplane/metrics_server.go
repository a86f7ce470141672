package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// metricsServerManifest is metrics-server v0.8.0's components.yaml, less
// its Deployment (up runs it as a process) and its ServiceAccount (it is
// the user system:metrics-server, by client cert): its rights, and its
// APIService behind an ExternalName Service, which kube-apiserver's
// aggregation layer resolves to the name itself: localhost, at %[1]d.
// Its serving cert is the cluster CA's, given as the caBundle (%[2]s).
const metricsServerManifest = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:aggregated-metrics-reader
  labels:
    rbac.authorization.k8s.io/aggregate-to-admin: "true"
    rbac.authorization.k8s.io/aggregate-to-edit: "true"
    rbac.authorization.k8s.io/aggregate-to-view: "true"
rules:
- apiGroups: ["metrics.k8s.io"]
  resources: ["pods", "nodes"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:metrics-server
rules:
- apiGroups: [""]
  resources: ["nodes/metrics"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["pods", "nodes"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: metrics-server-auth-reader
  namespace: kube-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: extension-apiserver-authentication-reader
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: system:metrics-server
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: metrics-server:system:auth-delegator
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:auth-delegator
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: system:metrics-server
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:metrics-server
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:metrics-server
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: system:metrics-server
---
apiVersion: v1
kind: Service
metadata:
  name: metrics-server
  namespace: kube-system
spec:
  type: ExternalName
  externalName: localhost
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1beta1.metrics.k8s.io
spec:
  group: metrics.k8s.io
  version: v1beta1
  groupPriorityMinimum: 100
  versionPriority: 100
  service:
    name: metrics-server
    namespace: kube-system
    port: %[1]d
  caBundle: %[2]s
`

// registerMetricsServer applies metricsServerManifest with kubectl as the
// admin, for metrics-server serving at port.
func registerMetricsServer(self, dir, adminKubeconfig string, port int, p *pki) error {
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return err
	}
	manifest := filepath.Join(dir, "metrics-server", "manifest.yaml")
	if err := os.WriteFile(manifest, fmt.Appendf(nil, metricsServerManifest, port, base64.StdEncoding.EncodeToString(ca)), 0o600); err != nil {
		return err
	}
	var out bytes.Buffer
	apply := exec.Command(self, "kubectl", "--kubeconfig", adminKubeconfig, "apply", "-f", manifest)
	apply.Stdout, apply.Stderr = &out, &out
	if err := apply.Run(); err != nil {
		return fmt.Errorf("metrics-server's manifest: kubectl apply: %w: %s", err, out.Bytes())
	}
	return nil
}
