package configcache_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/consumer/configcache"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/schemas/sealed"
	"github.com/jetlet/jetlet/schemas/sealed/sealedtest"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/syncbuf"
)

// marker is the value of every test Secret: it must never show in an
// error, a log line or a report.
const marker = "MARKER-objects-s3cr3t"

// waitFor bounds every wait on the watches: a failure, never a measure.
const waitFor = 10 * time.Second

type env struct {
	js      jetstream.JetStream
	cms     jetstream.KeyValue
	secrets jetstream.KeyValue
	key     nkeys.KeyPair // node n1's
	xkey    string        // n1's public key
}

// newEnv provisions the contract's streams and buckets (on memory unless
// mods say otherwise) and makes node n1's curve key.
func newEnv(t testing.TB, js jetstream.JetStream, mods ...func(*natsjs.StreamsConfig)) *env {
	t.Helper()
	mods = append([]func(*natsjs.StreamsConfig){func(c *natsjs.StreamsConfig) { c.Storage = jetstream.MemoryStorage }}, mods...)
	jetlettest.Provision(t, js, mods...)
	e := &env{js: js}
	var err error
	if e.cms, err = js.KeyValue(t.Context(), schemas.BucketConfigMaps); err != nil {
		t.Fatal(err)
	}
	if e.secrets, err = js.KeyValue(t.Context(), schemas.BucketSecrets); err != nil {
		t.Fatal(err)
	}
	e.key, e.xkey = sealedtest.NodeKey(t)
	return e
}

// badReports records OnBadObject's calls.
type badReports struct {
	mu   sync.Mutex
	errs map[string]error // key → last error
	seen chan string      // each key reported
}

func newBadReports() *badReports {
	return &badReports{errs: map[string]error{}, seen: make(chan string, 100)}
}

func (r *badReports) report(key string, err error) {
	r.mu.Lock()
	r.errs[key] = err
	r.mu.Unlock()
	r.seen <- key
}

func (r *badReports) wait(t testing.TB, key string) error {
	t.Helper()
	timeout := time.After(waitFor)
	for {
		select {
		case k := <-r.seen:
			if k == key {
				r.mu.Lock()
				defer r.mu.Unlock()
				return r.errs[key]
			}
		case <-timeout:
			t.Fatalf("no bad-object report of key %s within %s", key, waitFor)
		}
	}
}

type started struct {
	*configcache.Objects
	bad *badReports
	log *syncbuf.Buffer
}

// start runs Objects for node n1 until the test ends, and checks that Run
// then returns nil and logged no Secret's value.
func (e *env) start(t testing.TB, cfg configcache.Config) started {
	t.Helper()
	s := e.new(t, cfg)
	s.run(t)
	return s
}

// running gives a new server's env and n1's Objects on it, Ready.
func running(t testing.TB) (*env, started) {
	t.Helper()
	_, js := natstest.Connect(t, natstest.RunServer(t))
	e := newEnv(t, js)
	o := e.start(t, configcache.Config{})
	o.waitReady(t)
	return e, o
}

func (e *env) new(t testing.TB, cfg configcache.Config) started {
	t.Helper()
	s := started{bad: newBadReports(), log: &syncbuf.Buffer{}}
	cfg.OnBadObject = s.bad.report
	cfg.Logger = zerolog.New(s.log).Level(zerolog.TraceLevel)
	o, err := configcache.New(e.js, "n1", e.key, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Objects = o
	t.Cleanup(func() {
		if strings.Contains(s.log.String(), marker) {
			t.Error("a Secret's value was logged")
		}
	})
	return s
}

func (s started) run(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func (s started) waitReady(t testing.TB) {
	t.Helper()
	select {
	case <-s.Ready():
	case <-time.After(waitFor):
		t.Fatalf("not Ready within %s", waitFor)
	}
}

// waitChanged reads Changed until a batch names ref.
func (s started) waitChanged(t testing.TB, ref kubecontainer.ObjectRef) {
	t.Helper()
	s.waitChangedWithin(t, ref, waitFor)
}

func (s started) waitChangedWithin(t testing.TB, ref kubecontainer.ObjectRef, waitFor time.Duration) {
	t.Helper()
	timeout := time.After(waitFor)
	for {
		select {
		case batch := <-s.Changed():
			for _, r := range batch {
				if r == ref {
					return
				}
			}
		case <-timeout:
			t.Fatalf("%s not in Changed within %s", ref, waitFor)
		}
	}
}

func configMap(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data:       data,
	}
}

func secret(namespace, name, value string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte(value)},
	}
}

func putJSON(t testing.TB, kv jetstream.KeyValue, key string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), key, data); err != nil {
		t.Fatal(err)
	}
}

func (e *env) putConfigMap(t testing.TB, cm *corev1.ConfigMap) kubecontainer.ObjectRef {
	t.Helper()
	putJSON(t, e.cms, cm.Namespace+"."+cm.Name, cm)
	return kubecontainer.ObjectRef{Kind: kubecontainer.KindConfigMap, Namespace: cm.Namespace, Name: cm.Name}
}

// putSecret seals s for node's xkey and puts it under node's key.
func (e *env) putSecret(t testing.TB, node, xkey string, s *corev1.Secret) kubecontainer.ObjectRef {
	t.Helper()
	ss, err := sealed.Seal(s, node, xkey)
	if err != nil {
		t.Fatal(err)
	}
	putJSON(t, e.secrets, sealed.SecretKey(node, s.Namespace, s.Name), ss)
	return kubecontainer.ObjectRef{Kind: kubecontainer.KindSecret, Namespace: s.Namespace, Name: s.Name}
}

// noMarker fails if err holds a Secret's value.
func noMarker(t testing.TB, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), marker) {
		t.Error("an error holds a Secret's value")
	}
}
