package client

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/sealed"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/testimages"
)

// sealingNode stores node's record with a curve public key, as a running
// jetlet does, and returns the key pair that opens its Secrets.
func (c *cluster) sealingNode(node string) nkeys.KeyPair {
	c.t.Helper()
	c.heartbeat(node)
	kp, err := nkeys.CreateCurveKeys()
	if err != nil {
		c.t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	kv := c.kv(schemas.BucketNodes)
	e, err := kv.Get(c.t.Context(), node)
	if err != nil {
		c.t.Fatal(err)
	}
	var rec schemas.NodeRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		c.t.Fatal(err)
	}
	rec.XKey = pub
	if _, err := kv.Put(c.t.Context(), node, mustJSON(c.t, rec)); err != nil {
		c.t.Fatal(err)
	}
	return kp
}

func (c *cluster) kv(bucket string) jetstream.KeyValue {
	c.t.Helper()
	kv, err := c.js.KeyValue(c.t.Context(), bucket)
	if err != nil {
		c.t.Fatal(err)
	}
	return kv
}

// stored is the value of key in bucket, nil when there is none.
func (c *cluster) stored(bucket, key string) []byte {
	c.t.Helper()
	e, err := c.kv(bucket).Get(c.t.Context(), key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return e.Value()
}

func (c *cluster) configMap(ns, name string) *corev1.ConfigMap {
	c.t.Helper()
	data := c.stored(schemas.BucketConfigMaps, ns+"."+name)
	if data == nil {
		c.t.Fatalf("configmap %s/%s not stored", ns, name)
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(data, &cm); err != nil {
		c.t.Fatal(err)
	}
	return &cm
}

// openSecret opens the Secret sealed for node with its key pair.
func (c *cluster) openSecret(node, ns, name string, kp nkeys.KeyPair) (*corev1.Secret, error) {
	c.t.Helper()
	data := c.stored(schemas.BucketSecrets, sealed.SecretKey(node, ns, name))
	if data == nil {
		c.t.Fatalf("secret %s/%s not stored for node %s", ns, name, node)
	}
	var ss schemas.SealedSecret
	if err := json.Unmarshal(data, &ss); err != nil {
		c.t.Fatal(err)
	}
	return sealed.Open(&ss, node, kp)
}

// keys counts the keys of a bucket.
func (c *cluster) keys(bucket string) int {
	c.t.Helper()
	keys, err := c.kv(bucket).Keys(c.t.Context())
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return 0
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return len(keys)
}

const configManifest = `apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data:
  mode: prod
  app.properties: |
    color=blue
---
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: shop}
data:
  user: YWRtaW4=
  password: b2xk
stringData:
  password: from-string-data
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  nodeName: n1
  containers:
  - {name: app, image: busybox:1.36, command: [sleep, "1000"]}
`

func TestApplyConfigMapAndSecretWithAPod(t *testing.T) {
	c := newCluster(t)
	k1, k2 := c.sealingNode("n1"), c.sealingNode("n2")

	res := c.runIn(configManifest, "apply", "-f", "-", "--nodes", "n1,n2")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "configmap/default/app-config created\n",
		"secret/shop/db sealed for node n1 (created)\n", "secret/shop/db sealed for node n2 (created)\n",
		"pod/default/web applied on node n1")
	if strings.Index(res.stdout, "secret/shop/db") > strings.Index(res.stdout, "pod/default/web") {
		t.Errorf("the pod was published before the objects it may use:\n%s", res.stdout)
	}

	cm := c.configMap("default", "app-config")
	if cm.Kind != "ConfigMap" || cm.APIVersion != "v1" || cm.Data["mode"] != "prod" || cm.Data["app.properties"] != "color=blue\n" ||
		cm.UID == "" || cm.CreationTimestamp.IsZero() {
		t.Errorf("stored ConfigMap %+v", cm)
	}
	for node, kp := range map[string]nkeys.KeyPair{"n1": k1, "n2": k2} {
		s, err := c.openSecret(node, "shop", "db", kp)
		if err != nil {
			t.Fatalf("node %s cannot open its Secret: %v", node, err)
		}
		if s.Type != corev1.SecretTypeOpaque || string(s.Data["user"]) != "admin" || string(s.Data["password"]) != "from-string-data" || s.StringData != nil {
			t.Errorf("node %s opened %s %v %v: want Opaque, stringData merged into data", node, s.Type, s.Data, s.StringData)
		}
	}
	// n2's key does not open n1's copy.
	if _, err := c.openSecret("n1", "shop", "db", k2); err == nil {
		t.Error("n2's key opened the Secret sealed for n1")
	}
	raw := string(c.stored(schemas.BucketSecrets, "n1.shop.db"))
	if strings.Contains(raw, "from-string-data") || strings.Contains(raw, base64.StdEncoding.EncodeToString([]byte("from-string-data"))) {
		t.Errorf("the stored Secret holds its plaintext: %s", raw)
	}

	// Again: the ConfigMap is unchanged (not put), the Secret sealed again.
	res = c.runIn(configManifest, "apply", "-f", "-", "--nodes", "n1,n2", "-o", "json")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout,
		`{"kind":"ConfigMap","name":"app-config","namespace":"default","result":"unchanged"}`,
		`{"kind":"Secret","name":"db","namespace":"shop","node":"n1","result":"configured"}`)

	// Changed: configured, keeping its uid and creation time.
	changed := strings.Replace(configManifest, "mode: prod", "mode: staging", 1)
	res = c.runIn(changed, "apply", "-f", "-", "--nodes", "n1,n2")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "configmap/default/app-config configured\n")
	if now := c.configMap("default", "app-config"); now.Data["mode"] != "staging" || now.UID != cm.UID || !now.CreationTimestamp.Equal(&cm.CreationTimestamp) {
		t.Errorf("changed ConfigMap %+v, want uid %s and creation %s kept", now, cm.UID, cm.CreationTimestamp)
	}

	// Only a ConfigMap: no node is needed.
	res = c.runIn("kind: ConfigMap\napiVersion: v1\nmetadata: {name: solo, namespace: other}\n", "apply", "-f", "-")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "configmap/other/solo created")
	if got := len(c.intents()); got != 1 {
		t.Errorf("%d intents, want 1 (the pod is unchanged by the later applies)", got)
	}
}

func TestApplySecretNeedsNodesWithARecord(t *testing.T) {
	c := newCluster(t)
	c.sealingNode("n1")
	c.heartbeat("old") // a jetlet from before Secrets: no xkey

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no node", nil, []string{"secret/shop/db: a Secret is sealed for the nodes whose pods use it: give --node N or --nodes N1,N2"}},
		{"no record", []string{"--nodes", "n1,n3"}, []string{"cannot seal Secrets: node n3 has no record in jetlet_nodes", "jetlet run --node n3", "nothing was stored"}},
		{"no xkey", []string{"--nodes", "old"}, []string{"node old's record in jetlet_nodes has no xkey"}},
		{"both flags", []string{"--node", "n1", "--nodes", "n1"}, []string{"give --node or --nodes, not both"}},
		{"bad name", []string{"--nodes", "n1,N_2"}, []string{`--nodes: "N_2" is not a node name`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.runIn(configManifest, append([]string{"apply", "-f", "-"}, tc.args...)...)
			wantCode(t, res, 1)
			wantContains(t, "stderr", res.stderr, tc.want...)
		})
	}
	if n := c.keys(schemas.BucketSecrets) + c.keys(schemas.BucketConfigMaps) + len(c.intents()); n != 0 {
		t.Errorf("%d objects or intents stored by refused applies", n)
	}
}

func TestApplyValidatesConfigMapsAndSecretsAsTheAPIServer(t *testing.T) {
	c := newCluster(t)
	c.sealingNode("n1")
	for _, tc := range []struct{ name, doc, want string }{
		{"name", "kind: ConfigMap\nmetadata: {name: Bad_Name}\n", `metadata.name "Bad_Name": a lowercase RFC 1123 subdomain`},
		{"no name", "kind: ConfigMap\nmetadata: {generateName: x-}\n", "metadata.generateName: not supported"},
		{"namespace", "kind: Secret\nmetadata: {name: s, namespace: a.b}\n", `metadata.namespace "a.b": must not contain dots`},
		{"key", "kind: ConfigMap\nmetadata: {name: c}\ndata: {\"a b\": x}\n", `data["a b"]: not a valid key: a valid config key must consist of alphanumeric characters`},
		{"key twice", "kind: ConfigMap\nmetadata: {name: c}\ndata: {k: x}\nbinaryData: {k: eA==}\n", `data["k"]: the key is in binaryData too`},
		{"secret key", "kind: Secret\nmetadata: {name: s}\nstringData: {\"../x\": v}\n", `data["../x"]: not a valid key`},
		{"unknown field", "kind: ConfigMap\nmetadata: {name: c}\ndatas: {k: x}\n", `unknown field "datas"`},
		{"base64", "kind: Secret\nmetadata: {name: s}\ndata: {k: \"not base64!\"}\n", "illegal base64 data"},
		{"docker", "kind: Secret\ntype: kubernetes.io/dockerconfigjson\nmetadata: {name: s}\nstringData: {x: v}\n", `data[".dockerconfigjson"]: required for a Secret of type kubernetes.io/dockerconfigjson`},
		{"docker json", "kind: Secret\ntype: kubernetes.io/dockerconfigjson\nmetadata: {name: s}\nstringData: {.dockerconfigjson: \"{nope\"}\n", `data[".dockerconfigjson"]: not valid JSON (the content is not shown)`},
		{"tls", "kind: Secret\ntype: kubernetes.io/tls\nmetadata: {name: s}\nstringData: {tls.crt: c}\n", `data["tls.key"]: required`},
		{"apiVersion", "kind: Secret\napiVersion: v2\nmetadata: {name: s}\n", `apiVersion "v2": a Secret is v1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.runIn(podYAML("good", "app")+"---\n"+tc.doc, "apply", "-f", "-", "--node", "n1")
			wantCode(t, res, 1)
			wantContains(t, "stderr", res.stderr, tc.want)
		})
	}
	if n := c.keys(schemas.BucketSecrets) + c.keys(schemas.BucketConfigMaps) + len(c.intents()); n != 0 {
		t.Errorf("%d objects or intents stored by invalid applies", n)
	}
}

// An immutable ConfigMap is refused every change the API server refuses
// (its data, or immutable set back to false); applied unchanged, it is
// "unchanged"; deleted, it can be made again.
func TestApplyRefusesToChangeAnImmutableConfigMap(t *testing.T) {
	c := newCluster(t)
	doc := func(immutable, value string) string {
		return "kind: ConfigMap\nmetadata: {name: frozen}\nimmutable: " + immutable + "\ndata: {k: " + value + "}\n"
	}
	wantCode(t, c.runIn(doc("true", "v1"), "apply", "-f", "-"), 0)
	stored := c.stored(schemas.BucketConfigMaps, "default.frozen")
	for _, tc := range []struct{ name, doc, want string }{
		{"data", doc("true", "v2"), "configmap default/frozen: data: field is immutable when `immutable` is set"},
		{"immutable false", doc("false", "v1"), "configmap default/frozen: immutable: field is immutable when `immutable` is set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.runIn(tc.doc, "apply", "-f", "-")
			wantCode(t, res, 1)
			wantContains(t, "stderr", res.stderr, tc.want)
			if got := c.stored(schemas.BucketConfigMaps, "default.frozen"); !bytes.Equal(got, stored) {
				t.Errorf("the immutable ConfigMap was replaced: %s", got)
			}
		})
	}
	wantContains(t, "stdout", c.runIn(doc("true", "v1"), "apply", "-f", "-").stdout, "configmap/default/frozen unchanged")
	wantCode(t, c.run("delete", "configmap", "frozen"), 0)
	wantCode(t, c.runIn(doc("true", "v2"), "apply", "-f", "-"), 0)
}

func TestCreateConfigMapAsKubectl(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf")
	must(t, os.Mkdir(conf, 0o755))
	must(t, os.WriteFile(filepath.Join(conf, "a.txt"), []byte("A"), 0o644))
	must(t, os.WriteFile(filepath.Join(conf, "blob"), []byte{0xff, 0xfe, 0}, 0o644))
	must(t, os.Mkdir(filepath.Join(conf, "sub"), 0o755)) // not a regular file: skipped
	site := filepath.Join(dir, "site.conf")
	must(t, os.WriteFile(site, []byte("server {}\n"), 0o644))
	env := filepath.Join(dir, "app.env")
	must(t, os.WriteFile(env, []byte("\ufeff# comment\n\nLEVEL=debug\n  FROM_ENV\nEQ=a=b\n"), 0o644))
	t.Setenv("FROM_ENV", "inherited")

	res := c.run("create", "configmap", "app", "-n", "web", "--from-file", conf, "--from-file", "nginx.conf="+site,
		"--from-literal", "mode=prod", "--from-env-file", env)
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "configmap/web/app created\n")
	cm := c.configMap("web", "app")
	want := map[string]string{"a.txt": "A", "nginx.conf": "server {}\n", "mode": "prod", "LEVEL": "debug", "FROM_ENV": "inherited", "EQ": "a=b"}
	for k, v := range want {
		if cm.Data[k] != v {
			t.Errorf("data[%q] = %q, want %q", k, cm.Data[k], v)
		}
	}
	if len(cm.Data) != len(want) || string(cm.BinaryData["blob"]) != "\xff\xfe\x00" {
		t.Errorf("stored %v %v", cm.Data, cm.BinaryData)
	}

	// It exists now: create refuses, as kubectl's AlreadyExists.
	res = c.run("create", "cm", "app", "-n", "web", "--from-literal", "mode=dev")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "configmap/web/app already exists (jetlet apply -f replaces it)")

	// --dry-run=client prints it and stores nothing; what it prints applies.
	res = c.run("create", "configmap", "printed", "--from-literal", "k=v", "--dry-run=client", "-o", "yaml")
	wantCode(t, res, 0)
	var printed corev1.ConfigMap
	must(t, yaml.UnmarshalStrict([]byte(res.stdout), &printed))
	if printed.Kind != "ConfigMap" || printed.Name != "printed" || printed.Namespace != "default" || printed.Data["k"] != "v" {
		t.Errorf("dry run printed %s", res.stdout)
	}
	if c.stored(schemas.BucketConfigMaps, "default.printed") != nil {
		t.Error("--dry-run=client stored the ConfigMap")
	}
	wantCode(t, c.runIn(res.stdout, "apply", "-f", "-"), 0)
	wantContains(t, "dry run", c.run("create", "configmap", "x", "--dry-run").stdout, "configmap/default/x created (dry run)")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"key", []string{"--from-literal", "a b=c"}, `data["a b"]: not a valid key`},
		{"twice", []string{"--from-literal", "k=1", "--from-literal", "k=2"}, `key "k" is given twice`},
		{"literal", []string{"--from-literal", "novalue"}, "--from-literal: an argument is not KEY=VALUE"},
		{"dir key", []string{"--from-file", "k=" + conf}, "a directory gives each file its own key"},
		{"missing", []string{"--from-file", filepath.Join(dir, "nope")}, "no such file or directory"},
		{"name", []string{}, "metadata.name \"Bad\""},
		{"server dry run", []string{"--dry-run=server"}, "there is no API server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "ok"
			if tc.name == "name" {
				name = "Bad"
			}
			res := c.run(append([]string{"create", "configmap", name}, tc.args...)...)
			wantCode(t, res, 1)
			wantContains(t, "stderr", res.stderr, tc.want)
		})
	}
}

func TestCreateSecretGenericAndDockerRegistry(t *testing.T) {
	c := newCluster(t)
	k1 := c.sealingNode("n1")
	dir := t.TempDir()
	key := filepath.Join(dir, "id_rsa")
	must(t, os.WriteFile(key, []byte("PRIVATE"), 0o600))

	res := c.run("create", "secret", "generic", "db", "--from-literal", "password=pw", "--from-file", key, "--node", "n1")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "secret/default/db sealed for node n1 (created)\n")
	s, err := c.openSecret("n1", "default", "db", k1)
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != corev1.SecretTypeOpaque || string(s.Data["password"]) != "pw" || string(s.Data["id_rsa"]) != "PRIVATE" {
		t.Errorf("opened %s %v", s.Type, s.Data)
	}
	res = c.run("create", "secret", "generic", "db", "--from-literal", "password=pw", "--node", "n1")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "secret/default/db already exists on node n1")
	res = c.run("create", "secret", "generic", "nonode", "--from-literal", "password=pw")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "give --node N or --nodes N1,N2")

	res = c.run("create", "secret", "docker-registry", "regcred", "--docker-server", "registry.example.com",
		"--docker-username", "ci", "--docker-password", "tok", "--docker-email", "ci@example.com", "--nodes", "n1")
	wantCode(t, res, 0)
	s, err = c.openSecret("n1", "default", "regcred", k1)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"auths":{"registry.example.com":{"username":"ci","password":"tok","email":"ci@example.com","auth":"Y2k6dG9r"}}}`
	if s.Type != corev1.SecretTypeDockerConfigJson || string(s.Data[corev1.DockerConfigJsonKey]) != want {
		t.Errorf("opened %s %s, want %s", s.Type, s.Data[corev1.DockerConfigJsonKey], want)
	}

	// A dry run needs no node and prints data in base64, as kubectl.
	res = c.run("create", "secret", "generic", "tls", "--type", "kubernetes.io/tls", "--from-literal", "tls.crt=C", "--from-literal", "tls.key=K",
		"--dry-run=client", "-o", "json")
	wantCode(t, res, 0)
	var printed corev1.Secret
	must(t, json.Unmarshal([]byte(res.stdout), &printed))
	if printed.Type != corev1.SecretTypeTLS || string(printed.Data["tls.key"]) != "K" || !strings.Contains(res.stdout, `"tls.key": "Sw=="`) {
		t.Errorf("dry run printed %s", res.stdout)
	}
	res = c.run("create", "secret", "generic", "tls", "--type", "kubernetes.io/tls", "--from-literal", "tls.crt=C", "--node", "n1")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, `data["tls.key"]: required for a Secret of type kubernetes.io/tls`)
}

// create secret tls as kubectl's: tls.crt and tls.key from the files, type
// kubernetes.io/tls, sealed; a key that is not the certificate's, or a file
// that is no PEM, refused before anything is stored, naming the files only.
func TestCreateSecretTLS(t *testing.T) {
	c := newCluster(t)
	k1 := c.sealingNode("n1")
	dir := t.TempDir()
	file := func(name string, content []byte) string {
		path := filepath.Join(dir, name)
		must(t, os.WriteFile(path, content, 0o600))
		return path
	}
	crt, key, err := testimages.KeyPairPEM("web.example.com")
	must(t, err)
	_, otherKey, err := testimages.KeyPairPEM("other.example.com")
	must(t, err)
	crtFile, keyFile, otherKeyFile := file("web.crt", crt), file("web.key", key), file("other.key", otherKey)

	res := c.run("create", "secret", "tls", "web-tls", "-n", "shop", "--cert", crtFile, "--key", keyFile, "--node", "n1")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "secret/shop/web-tls sealed for node n1 (created)\n")
	s, err := c.openSecret("n1", "shop", "web-tls", k1)
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != corev1.SecretTypeTLS || len(s.Data) != 2 || !bytes.Equal(s.Data["tls.crt"], crt) || !bytes.Equal(s.Data["tls.key"], key) {
		t.Errorf("opened %s with keys %v", s.Type, slices.Sorted(maps.Keys(s.Data)))
	}

	for _, tc := range []struct {
		name, cert, key, want string
	}{
		{"another certificate's key", crtFile, otherKeyFile, "are not a key pair: tls: private key does not match public key"},
		{"a key for a certificate", keyFile, keyFile, "are not a key pair: tls: failed to find certificate PEM data"},
		{"no such file", filepath.Join(dir, "none.crt"), keyFile, "--cert: open " + filepath.Join(dir, "none.crt")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.run("create", "secret", "tls", "bad", "--cert", tc.cert, "--key", tc.key, "--node", "n1")
			wantCode(t, res, 1)
			wantContains(t, "stderr", res.stderr, tc.want)
			if strings.Contains(res.stderr, "PRIVATE KEY") {
				t.Errorf("the key's content is in the error: %s", res.stderr)
			}
			if c.stored(schemas.BucketSecrets, sealed.SecretKey("n1", "default", "bad")) != nil {
				t.Error("a refused Secret was stored")
			}
		})
	}
	wantContains(t, "stderr", c.run("create", "secret", "tls", "nokey", "--cert", crtFile, "--node", "n1").stderr, `required flag(s) "key" not set`)
}

func TestGetAndDeleteConfigMapsAndSecrets(t *testing.T) {
	c := newCluster(t)
	c.sealingNode("n1")
	c.sealingNode("n2")
	wantCode(t, c.runIn(configManifest, "apply", "-f", "-", "--nodes", "n1,n2"), 0)
	wantCode(t, c.run("create", "configmap", "other", "-n", "shop", "--from-literal", "a=1", "--from-literal", "b=2"), 0)
	wantCode(t, c.run("create", "secret", "generic", "api.token", "--from-literal", "t=x", "--node", "n2"), 0)

	res := c.run("get", "configmaps")
	wantCode(t, res, 0)
	wantLines(t, res.stdout, `^NAMESPACE\s+NAME\s+DATA\s+AGE$`, `^default\s+app-config\s+2\s+\d+s$`)
	res = c.run("get", "cm", "-A")
	wantCode(t, res, 0)
	wantLines(t, res.stdout, `^NAMESPACE`, `^default\s+app-config\s+2\s`, `^shop\s+other\s+2\s`)
	res = c.run("get", "cm", "other", "-n", "shop", "-o", "json")
	wantCode(t, res, 0)
	var cms list[corev1.ConfigMap]
	must(t, json.Unmarshal([]byte(res.stdout), &cms))
	if cms.Kind != "ConfigMapList" || len(cms.Items) != 1 || cms.Items[0].Data["b"] != "2" {
		t.Errorf("-o json: %s", res.stdout)
	}
	res = c.run("get", "cm", "nothere")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, `configmap "nothere" not found in namespace default`)

	res = c.run("get", "secrets", "-A")
	wantCode(t, res, 0)
	wantLines(t, res.stdout, `^NAMESPACE\s+NAME\s+NODE\s+AGE$`, `^default\s+api\.token\s+n2\s+\d+s$`, `^shop\s+db\s+n1\s`, `^shop\s+db\s+n2\s`)
	res = c.run("get", "secrets", "-n", "shop", "--node", "n2", "-o", "json")
	wantCode(t, res, 0)
	var ss list[schemas.SealedSecret]
	must(t, json.Unmarshal([]byte(res.stdout), &ss))
	if ss.Kind != "SealedSecretList" || len(ss.Items) != 1 || ss.Items[0].Node != "n2" || ss.Items[0].Sealed == "" || ss.Items[0].Kind != schemas.KindSealedSecret {
		t.Errorf("-o json: %s", res.stdout)
	}
	res = c.run("get", "secrets")
	wantCode(t, res, 0)
	if strings.Contains(res.stdout, "shop") {
		t.Errorf("namespace default lists shop's secrets:\n%s", res.stdout)
	}

	// One node's copy, then every node's.
	res = c.run("delete", "secret", "shop/db", "--node", "n2")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "secret/shop/db deleted on node n2\n")
	if c.stored(schemas.BucketSecrets, "n2.shop.db") != nil || c.stored(schemas.BucketSecrets, "n1.shop.db") == nil {
		t.Error("delete --node n2 did not delete n2's copy alone")
	}
	wantCode(t, c.runIn(configManifest, "apply", "-f", "-", "--nodes", "n1,n2"), 0)
	res = c.run("delete", "secret", "db", "-n", "shop")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "secret/shop/db deleted on node n1\n", "secret/shop/db deleted on node n2\n")
	res = c.run("delete", "secret", "shop/db")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "secret shop/db not found on any node in jetlet_secrets")
	wantCode(t, c.run("delete", "secret", "shop/db", "--ignore-not-found"), 0)

	res = c.run("delete", "configmap", "default/app-config")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "configmap/default/app-config deleted\n")
	if c.stored(schemas.BucketConfigMaps, "default.app-config") != nil {
		t.Error("the ConfigMap is still stored")
	}
	res = c.run("delete", "cm", "default/app-config")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "configmap default/app-config not found in jetlet_configmaps")
	res = c.run("delete", "cm", "Bad/x")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, `metadata.namespace "Bad"`)

	// A pod is still deleted by NAMESPACE/NAME beside the subcommands.
	res = c.run("delete", "default/web")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "pod/default/web delete requested on node n1")

	// The watches that read the buckets leave no consumer behind.
	left := 0
	poll.Until(t, 5*time.Second, func() string { return fmt.Sprintf("%d consumers left on the buckets", left) }, func() bool {
		left = 0
		for _, b := range []string{schemas.BucketConfigMaps, schemas.BucketSecrets} {
			s, err := c.js.Stream(t.Context(), "KV_"+b)
			must(t, err)
			left += s.CachedInfo().State.Consumers // as of this lookup
		}
		return left == 0
	})
}

// TestSecretValuesNeverPrinted runs every command on Secrets holding a
// marker, the failing ones included, and greps all they print for it (and
// for its base64): only a dry run's -o prints a Secret, on purpose.
func TestSecretValuesNeverPrinted(t *testing.T) {
	const marker = "M4RK3R-s3cr3t-v4lue"
	b64 := base64.StdEncoding.EncodeToString([]byte(marker))
	c := newCluster(t)
	c.sealingNode("n1")
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	must(t, os.WriteFile(file, []byte(marker), 0o600))
	env := filepath.Join(dir, "bad.env")
	must(t, os.WriteFile(env, []byte("OK=1\n"+marker+" oops\n"), 0o600))
	manifest := "kind: Secret\napiVersion: v1\nmetadata: {name: m}\nstringData: {k: " + marker + "}\n"

	runs := [][]string{
		{"apply", "-f", "-", "--node", "n1"},
		{"apply", "-f", "-", "--node", "n1", "-o", "json"},
		{"apply", "-f", "-", "--node", "n9"},
		{"create", "secret", "generic", "lit", "--from-literal", "k=" + marker, "--node", "n1"},
		{"create", "secret", "generic", "lit", "--from-literal", "k=" + marker, "--node", "n1"}, // exists
		{"create", "secret", "generic", "file", "--from-file", file, "--node", "n1"},
		{"create", "secret", "generic", "bad", "--from-literal", marker, "--node", "n1"},
		{"create", "secret", "generic", "bad", "--from-literal", "=" + marker, "--node", "n1"},
		{"create", "secret", "generic", "bad", "--from-env-file", env, "--node", "n1"},
		{"create", "secret", "generic", "bad", "--from-literal", "k=" + marker, "--type", "kubernetes.io/dockerconfigjson", "--node", "n1"},
		{"create", "secret", "generic", "bad", "--from-literal", "k=" + marker, "--nodes", "n1,n9"},
		{"create", "secret", "docker-registry", "reg", "--docker-username", "u", "--docker-password", marker, "--node", "n1"},
		{"create", "secret", "docker-registry", "reg", "--docker-username", "u", "--docker-password", marker, "--node", "n1"}, // exists
		{"get", "secrets", "-A"},
		{"get", "secrets", "-o", "json"},
		{"get", "secrets", "-o", "yaml"},
		{"get", "secrets", "m"},
		{"delete", "secret", "default/m"},
		{"delete", "secret", "default/m"},
	}
	for _, args := range runs {
		res := c.runIn(manifest, args...)
		for _, out := range []string{res.stdout, res.stderr} {
			if strings.Contains(out, marker) || strings.Contains(out, b64) {
				t.Errorf("jetlet %s printed the Secret's value:\n%s", strings.Join(args, " "), out)
			}
		}
	}
	// Invalid Secrets: the errors name keys, never values.
	for _, doc := range []string{
		"kind: Secret\nmetadata: {name: m}\nstringData: {\"bad key\": " + marker + "}\n",
		"kind: Secret\nmetadata: {name: m}\ntype: kubernetes.io/dockerconfigjson\nstringData: {.dockerconfigjson: " + marker + "}\n",
		"kind: Secret\nmetadata: {name: m}\ndata: {k: \"" + marker + "!\"}\n",
		"kind: Secret\nmetadata: {name: m}\ndata: {k: [" + marker + "]}\n",
		"kind: Secret\nmetadata: {name: m}\nstringData: {k: v}\nextra: " + marker + "\n",
	} {
		res := c.runIn(doc, "apply", "-f", "-", "--node", "n1")
		wantCode(t, res, 1)
		if strings.Contains(res.stdout+res.stderr, marker) || strings.Contains(res.stdout+res.stderr, b64) {
			t.Errorf("apply of an invalid Secret printed its value:\n%s%s", res.stdout, res.stderr)
		}
	}
	// What the bucket holds is ciphertext.
	keys, err := c.kv(schemas.BucketSecrets).Keys(t.Context())
	must(t, err)
	for _, k := range keys {
		if v := string(c.stored(schemas.BucketSecrets, k)); strings.Contains(v, marker) || strings.Contains(v, b64) {
			t.Errorf("%s holds the plaintext", k)
		}
	}
	// The redacting type shows nothing either.
	v := &secretValue{&corev1.Secret{Data: map[string][]byte{"k": []byte(marker)}}}
	js, _ := json.Marshal(v)
	for _, s := range []string{v.String(), v.GoString(), string(js)} {
		if strings.Contains(s, marker) || strings.Contains(s, b64) {
			t.Errorf("secretValue printed %s", s)
		}
	}
}

// wantLines checks that out's lines match the patterns, in order.
func wantLines(t *testing.T, out string, patterns ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(patterns) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(patterns), out)
	}
	for i, p := range patterns {
		if !regexp.MustCompile(p).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], p)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
