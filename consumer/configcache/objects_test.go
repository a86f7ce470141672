package configcache_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/consumer/configcache"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/schemas/sealed"
	"github.com/jetlet/jetlet/schemas/sealed/sealedtest"
	"github.com/jetlet/jetlet/test/natstest"
)

func TestNewRefuses(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	curve, xkey := sealedtest.NodeKey(t)
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	public, err := nkeys.FromPublicKey(xkey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		js   bool
		node string
		key  nkeys.KeyPair
		cfg  configcache.Config
	}{
		{name: "no JetStream", node: "n1", key: curve},
		{name: "node not a DNS label", js: true, node: "n1.x", key: curve},
		{name: "no key", js: true, node: "n1"},
		{name: "not a curve key", js: true, node: "n1", key: user},
		{name: "a curve public key only", js: true, node: "n1", key: public},
		{name: "negative sync wait", js: true, node: "n1", key: curve, cfg: configcache.Config{SyncWait: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := js
			if !tc.js {
				j = nil
			}
			if _, err := configcache.New(j, tc.node, tc.key, tc.cfg); !errors.Is(err, configcache.ErrInvalidConfig) {
				t.Errorf("New: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestConfigMapPutUpdateDelete(t *testing.T) {
	e, o := running(t)

	// A name may hold dots: everything after the namespace token.
	ref := e.putConfigMap(t, configMap("default", "app.v1", map[string]string{"mode": "one"}))
	o.waitChanged(t, ref)
	if cm, err := o.ConfigMap("default", "app.v1"); err != nil || cm.Data["mode"] != "one" {
		t.Fatalf("after the put: %v, %v; want mode one", cm, err)
	}

	e.putConfigMap(t, configMap("default", "app.v1", map[string]string{"mode": "two"}))
	o.waitChanged(t, ref)
	if cm, err := o.ConfigMap("default", "app.v1"); err != nil || cm.Data["mode"] != "two" {
		t.Fatalf("after the update: %v, %v; want mode two", cm, err)
	}

	if err := e.cms.Delete(t.Context(), "default.app.v1"); err != nil {
		t.Fatal(err)
	}
	o.waitChanged(t, ref)
	_, err := o.ConfigMap("default", "app.v1")
	if !errors.Is(err, kubecontainer.ErrObjectNotFound) || err.Error() != "configmap default/app.v1 not found" {
		t.Fatalf("after the delete: %v, want configmap default/app.v1 not found", err)
	}
	// A purge (the history gone too) removes it as well.
	e.putConfigMap(t, configMap("default", "app.v1", map[string]string{"mode": "three"}))
	o.waitChanged(t, ref)
	if err := e.cms.Purge(t.Context(), "default.app.v1"); err != nil {
		t.Fatal(err)
	}
	o.waitChanged(t, ref)
	if _, err := o.ConfigMap("default", "app.v1"); !errors.Is(err, kubecontainer.ErrObjectNotFound) {
		t.Fatalf("after the purge: %v, want not found", err)
	}
}

func TestSecretPutUpdateDelete(t *testing.T) {
	e, o := running(t)

	ref := e.putSecret(t, "n1", e.xkey, secret("default", "db", marker+"-1"))
	o.waitChanged(t, ref)
	if s, err := o.Secret("default", "db"); err != nil || string(s.Data["password"]) != marker+"-1" {
		noMarker(t, err)
		t.Fatalf("after the put: %v; want the first password", err)
	}

	e.putSecret(t, "n1", e.xkey, secret("default", "db", marker+"-2"))
	o.waitChanged(t, ref)
	if s, err := o.Secret("default", "db"); err != nil || string(s.Data["password"]) != marker+"-2" {
		noMarker(t, err)
		t.Fatalf("after the update: %v; want the second password", err)
	}

	if err := e.secrets.Delete(t.Context(), "n1.default.db"); err != nil {
		t.Fatal(err)
	}
	o.waitChanged(t, ref)
	_, err := o.Secret("default", "db")
	if !errors.Is(err, kubecontainer.ErrObjectNotFound) || err.Error() != "secret default/db not found" {
		t.Fatalf("after the delete: %v, want secret default/db not found", err)
	}
	// Not a ConfigMap because a Secret of its name exists.
	if _, err := o.ConfigMap("default", "db"); !errors.Is(err, kubecontainer.ErrObjectNotFound) {
		t.Errorf("ConfigMap default/db: %v, want not found", err)
	}
}

// An immutable ConfigMap or Secret keeps what was first read: an update of
// its data, or one setting immutable back to false, is refused as the API
// server refuses it (reported by its key, never its value) and wakes no pod;
// deleted, it can be put again.
func TestImmutableObjectsRefuseUpdates(t *testing.T) {
	e, o := running(t)
	immutable := func(cm *corev1.ConfigMap, v bool) *corev1.ConfigMap { cm.Immutable = &v; return cm }
	ref := e.putConfigMap(t, immutable(configMap("default", "frozen", map[string]string{"mode": "one"}), true))
	o.waitChanged(t, ref)
	for _, update := range []*corev1.ConfigMap{
		immutable(configMap("default", "frozen", map[string]string{"mode": "two"}), true),
		immutable(configMap("default", "frozen", map[string]string{"mode": "one"}), false),
	} {
		e.putConfigMap(t, update)
		if err := o.bad.wait(t, "default.frozen"); !errors.Is(err, schemas.ErrImmutable) {
			t.Fatalf("report %v, want ErrImmutable", err)
		}
		if cm, err := o.ConfigMap("default", "frozen"); err != nil || cm.Data["mode"] != "one" || !*cm.Immutable {
			t.Fatalf("after a refused update: %+v, %v; want mode one, immutable", cm, err)
		}
	}
	if err := e.cms.Delete(t.Context(), "default.frozen"); err != nil {
		t.Fatal(err)
	}
	o.waitChanged(t, ref)
	e.putConfigMap(t, immutable(configMap("default", "frozen", map[string]string{"mode": "three"}), true))
	o.waitChanged(t, ref)
	if cm, err := o.ConfigMap("default", "frozen"); err != nil || cm.Data["mode"] != "three" {
		t.Fatalf("put again after its delete: %+v, %v; want mode three", cm, err)
	}

	frozen := secret("default", "db", marker+"-1")
	frozen.Immutable = new(true)
	sref := e.putSecret(t, "n1", e.xkey, frozen)
	o.waitChanged(t, sref)
	changed := secret("default", "db", marker+"-2")
	changed.Immutable = new(true)
	e.putSecret(t, "n1", e.xkey, changed)
	err := o.bad.wait(t, "n1.default.db")
	noMarker(t, err)
	if !errors.Is(err, schemas.ErrImmutable) || !strings.Contains(err.Error(), "secret default/db: data: field is immutable") {
		t.Fatalf("report %v, want the Secret's data immutable", err)
	}
	if s, err := o.Secret("default", "db"); err != nil || string(s.Data["password"]) != marker+"-1" {
		noMarker(t, err)
		t.Fatalf("after a refused update: %v; want the first password", err)
	}
}

// Another node's Secrets are outside the watch's filter: they never reach
// this node, not even as a value that does not open.
func TestAnotherNodesSecretsAreNeverSeen(t *testing.T) {
	e, o := running(t)
	_, n2 := sealedtest.NodeKey(t)

	e.putSecret(t, "n2", n2, secret("default", "db", marker))
	// n2's was stored first: the watch delivers in the stream's order, so
	// once n1's is in, n2's would have been too.
	ref := e.putSecret(t, "n1", e.xkey, secret("default", "other", marker))
	o.waitChanged(t, ref)
	_, err := o.Secret("default", "db")
	if !errors.Is(err, kubecontainer.ErrObjectNotFound) {
		t.Errorf("n2's Secret default/db on n1: %v, want not found", err)
	}
	noMarker(t, err)
	o.bad.mu.Lock()
	defer o.bad.mu.Unlock()
	if len(o.bad.errs) != 0 {
		t.Errorf("bad objects reported: %v, want none", o.bad.errs)
	}
}

// A value that does not decode or open is reported by its key with no
// content, leaves no entry (a good one before it included), and answers
// ErrObjectUnreadable, not ErrObjectNotFound: an optional reference must not
// skip an object that exists.
func TestBadObjects(t *testing.T) {
	e, o := running(t)
	_, n2 := sealedtest.NodeKey(t)

	sealedFor := func(node, xkey, name string) *schemas.SealedSecret {
		ss, err := sealed.Seal(secret("default", name, marker), node, xkey)
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	tampered := sealedFor("n1", e.xkey, "db")
	tampered.Sealed = tampered.Sealed[:len(tampered.Sealed)-4] + "AAA="

	for _, tc := range []struct {
		name, key string
		value     any // JSON-encoded unless []byte
		kind      kubecontainer.ObjectKind
		want      error // wrapped by the report, when set
	}{
		{name: "configmap not JSON", key: "default.app", value: []byte("{"), kind: kubecontainer.KindConfigMap},
		{name: "configmap of another kind", key: "default.app", value: map[string]any{"kind": "Secret", "metadata": map[string]string{"namespace": "default", "name": "app"}}, kind: kubecontainer.KindConfigMap},
		{name: "configmap under another name", key: "default.app", value: configMap("default", "other", nil), kind: kubecontainer.KindConfigMap},
		{name: "configmap under another namespace", key: "default.app", value: configMap("kube-system", "app", nil), kind: kubecontainer.KindConfigMap},
		{name: "secret not JSON", key: "n1.default.db", value: []byte(marker), kind: kubecontainer.KindSecret},
		{name: "secret sealed for another node's key", key: "n1.default.db", value: sealedFor("n1", n2, "db"), kind: kubecontainer.KindSecret, want: sealed.ErrDoesNotOpen},
		{name: "secret sealed for another node", key: "n1.default.db", value: sealedFor("n2", n2, "db"), kind: kubecontainer.KindSecret, want: sealed.ErrWrongNode},
		{name: "secret tampered with", key: "n1.default.db", value: tampered, kind: kubecontainer.KindSecret, want: sealed.ErrDoesNotOpen},
		{name: "secret copied to another key", key: "n1.default.db", value: sealedFor("n1", e.xkey, "other"), kind: kubecontainer.KindSecret, want: sealed.ErrDoesNotOpen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := kubecontainer.ObjectRef{Kind: tc.kind, Namespace: "default"}
			kv, get := e.cms, func() error { _, err := o.ConfigMap("default", "app"); return err }
			ref.Name = "app"
			if tc.kind == kubecontainer.KindSecret {
				ref.Name = "db"
				kv, get = e.secrets, func() error { _, err := o.Secret("default", "db"); return err }
				e.putSecret(t, "n1", e.xkey, secret("default", "db", marker))
			} else {
				e.putConfigMap(t, configMap("default", "app", nil))
			}
			o.waitChanged(t, ref)
			if err := get(); err != nil {
				t.Fatalf("the good value first: %v", err)
			}

			if raw, ok := tc.value.([]byte); ok {
				if _, err := kv.Put(t.Context(), tc.key, raw); err != nil {
					t.Fatal(err)
				}
			} else {
				putJSON(t, kv, tc.key, tc.value)
			}
			report := o.bad.wait(t, tc.key)
			noMarker(t, report)
			if !strings.Contains(report.Error(), tc.key) {
				t.Errorf("report %q does not name the key %s", report, tc.key)
			}
			if tc.want != nil && !errors.Is(report, tc.want) {
				t.Errorf("report %q, want it to wrap %q", report, tc.want)
			}
			o.waitChanged(t, ref)
			err := get()
			noMarker(t, err)
			if !errors.Is(err, kubecontainer.ErrObjectUnreadable) || errors.Is(err, kubecontainer.ErrObjectNotFound) || !strings.Contains(err.Error(), tc.key) {
				t.Errorf("read after the bad value: %v, want unreadable, naming %s", err, tc.key)
			}
		})
	}

	// A key that names no object: reported, nothing else.
	if _, err := e.cms.Put(t.Context(), "default", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := o.bad.wait(t, "default"); err == nil || !strings.Contains(err.Error(), "<namespace>.<name>") {
		t.Errorf("report of key default: %v, want it to say the key is not <namespace>.<name>", err)
	}
	// Deleting a bad value leaves the object missing.
	if err := e.secrets.Delete(t.Context(), "n1.default.db"); err != nil {
		t.Fatal(err)
	}
	o.waitChanged(t, kubecontainer.ObjectRef{Kind: kubecontainer.KindSecret, Namespace: "default", Name: "db"})
	if _, err := o.Secret("default", "db"); !errors.Is(err, kubecontainer.ErrObjectNotFound) {
		t.Errorf("after the bad value's delete: %v, want not found", err)
	}
}

// What the buckets held before Run is all in once Ready is closed; before
// it, a read waits for it (up to SyncWait) and is never told "not found".
func TestInitialValuesBeforeReady(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	e := newEnv(t, js)
	const n = 50
	want := map[kubecontainer.ObjectRef]bool{}
	for i := range n {
		want[e.putConfigMap(t, configMap("default", fmt.Sprintf("cm%d", i), map[string]string{"i": fmt.Sprint(i)}))] = true
		want[e.putSecret(t, "n1", e.xkey, secret("default", fmt.Sprintf("s%d", i), marker))] = true
	}

	early := e.new(t, configcache.Config{SyncWait: time.Millisecond})
	if _, err := early.ConfigMap("default", "cm0"); !errors.Is(err, kubecontainer.ErrObjectsNotSynced) || errors.Is(err, kubecontainer.ErrObjectNotFound) {
		t.Errorf("a read before Run: %v, want not synced (and not not-found)", err)
	}

	o := e.new(t, configcache.Config{SyncWait: time.Hour})
	last := make(chan error, 1)
	go func() {
		_, err := o.Secret("default", fmt.Sprintf("s%d", n-1))
		last <- err
	}()
	o.run(t)
	if err := <-last; err != nil {
		t.Errorf("a read made before Run, answered once Ready: %v, want the Secret", err)
	}
	o.waitReady(t)
	for ref := range want {
		var err error
		if ref.Kind == kubecontainer.KindConfigMap {
			_, err = o.ConfigMap(ref.Namespace, ref.Name)
		} else {
			_, err = o.Secret(ref.Namespace, ref.Name)
		}
		if err != nil {
			t.Errorf("after Ready: %v", err)
		}
	}
	// The initial values are changes too: a pod told "not synced" is woken.
	timeout := time.After(waitFor)
	for len(want) > 0 {
		select {
		case batch := <-o.Changed():
			for _, ref := range batch {
				delete(want, ref)
			}
		case <-timeout:
			t.Fatalf("%d initial values not in Changed within %s", len(want), waitFor)
		}
	}
}

// Changes made while nobody reads Changed are all delivered, each ref once
// a batch however many times it changed.
func TestChangedCoalesces(t *testing.T) {
	e, o := running(t)
	const n = 20
	for i := range n {
		e.putConfigMap(t, configMap("default", "app", map[string]string{"i": fmt.Sprint(i)}))
		e.putConfigMap(t, configMap("default", fmt.Sprintf("cm%d", i), nil))
	}
	want := fmt.Sprint(n - 1)
	seen := map[kubecontainer.ObjectRef]bool{}
	timeout := time.After(waitFor)
	for len(seen) < n+1 {
		select {
		case batch := <-o.Changed():
			inBatch := map[kubecontainer.ObjectRef]bool{}
			for _, ref := range batch {
				if inBatch[ref] {
					t.Errorf("%s twice in one batch", ref)
				}
				inBatch[ref], seen[ref] = true, true
			}
		case <-timeout:
			t.Fatalf("%d of %d refs in Changed within %s", len(seen), n+1, waitFor)
		}
	}
	// The last put of default/app was stored before the last cm: its change is in.
	if cm, err := o.ConfigMap("default", "app"); err != nil || cm.Data["i"] != want {
		t.Errorf("default/app: %v, %v; want i=%s", cm, err, want)
	}
}

func TestRunWithoutTheBuckets(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	key, _ := sealedtest.NodeKey(t)
	o, err := configcache.New(js, "n1", key, configcache.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "jetlet_") {
		t.Errorf("Run without the buckets: %v, want an error naming the bucket", err)
	}
	if err := o.Run(context.Background()); err == nil {
		t.Error("Run a second time: no error")
	}
}

// The watches resume after the server restarts: a put made afterwards
// reaches the cache.
func TestServerRestart(t *testing.T) {
	opts := natstest.Options(t.TempDir())
	s := natstest.Start(t, opts)
	opts.Port = s.Addr().(*net.TCPAddr).Port
	_, js := natstest.Connect(t, s)
	e := newEnv(t, js, func(c *natsjs.StreamsConfig) { c.Storage = jetstream.FileStorage })
	o := e.start(t, configcache.Config{})
	o.waitReady(t)
	ref := e.putConfigMap(t, configMap("default", "app", map[string]string{"v": "before"}))
	o.waitChanged(t, ref)

	s.Shutdown()
	s.WaitForShutdown()
	natstest.Start(t, opts)

	// The client reconnects on its own time: a put is tried until one is
	// stored (a put is idempotent), each waiting for the server's answer.
	after, err := json.Marshal(configMap("default", "app", map[string]string{"v": "after"}))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitFor)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err := e.cms.Put(ctx, "default.app", after)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no put stored within %s of the restart: %v", waitFor, err)
		}
	}
	// The watch resumes once its ordered consumer misses two of the
	// server's 5s idle heartbeats and is made again, from the revision after
	// the last it delivered.
	o.waitChangedWithin(t, ref, 4*waitFor)
	if cm, err := o.ConfigMap("default", "app"); err != nil || cm.Data["v"] != "after" {
		t.Errorf("after the restart: %v, %v; want v=after", cm, err)
	}
}
