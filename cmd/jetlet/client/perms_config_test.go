package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/sealed"
	"github.com/jetlet/jetlet/schemas/sealed/sealedtest"
)

// TestNATSConfigConfigBuckets checks docs/contract.md section 11's permissions on a
// nats-server run from `jetlet nats-config`: the scheduler puts and deletes
// ConfigMaps and sealed Secrets; a node reads every ConfigMap and, by get or
// watch, its own Secrets only; the auditor reads neither.
func TestNATSConfigConfigBuckets(t *testing.T) {
	s := startPermServer(t, "n1,n2", "")
	if res := s.as(t, "operator", "provision"); res.code != 0 {
		t.Fatalf("provision as the operator: exit %d", res.code)
	}
	ctx := t.Context()
	n1Key, n1XKey := sealedtest.NodeKey(t)
	_, n2XKey := sealedtest.NodeKey(t)

	sched := s.connect(t, "scheduler")
	schedCM := keyValue(t, sched, schemas.BucketConfigMaps)
	schedSec := keyValue(t, sched, schemas.BucketSecrets)
	if _, err := schedCM.Put(ctx, "default.app.config", []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)); err != nil {
		t.Fatalf("put a ConfigMap as the scheduler: %v", err)
	}
	putSecret := func(node, xkey, value string) {
		t.Helper()
		ss, err := sealed.Seal(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
			Data:       map[string][]byte{"password": []byte(value)},
		}, node, xkey)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(ss)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := schedSec.Put(ctx, sealed.SecretKey(node, "default", "db"), b); err != nil {
			t.Fatalf("put a sealed Secret as the scheduler: %v", err)
		}
	}
	putSecret("n1", n1XKey, "first")
	putSecret("n2", n2XKey, "n2's")
	if _, err := schedSec.Put(ctx, "n1.default.gone", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if err := schedSec.Delete(ctx, "n1.default.gone"); err != nil {
		t.Errorf("delete a Secret as the scheduler: %v", err)
	}

	n1 := s.connect(t, "node-n1", nats.CustomInboxPrefix("_INBOX_n1"))
	n1CM := keyValue(t, n1, schemas.BucketConfigMaps)
	n1Sec := keyValue(t, n1, schemas.BucketSecrets)
	t.Run("n1 reads and watches every ConfigMap", func(t *testing.T) {
		if _, err := n1CM.Get(ctx, "default.app.config"); err != nil {
			t.Errorf("get a ConfigMap as n1: %v", err)
		}
		w, err := n1CM.WatchAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if e := nextUpdate(t, w); e == nil || e.Key() != "default.app.config" {
			t.Errorf("n1's ConfigMap watch: %v", e)
		}
		if err := w.Stop(); err != nil {
			t.Errorf("stop the watch (its consumer deleted): %v", err)
		}
	})
	t.Run("n1 watches and opens its own Secrets", func(t *testing.T) {
		w, err := n1Sec.Watch(ctx, "n1.>", jetstream.IgnoreDeletes())
		if err != nil {
			t.Fatal(err)
		}
		open := func(e jetstream.KeyValueEntry) string {
			t.Helper()
			var ss schemas.SealedSecret
			if err := json.Unmarshal(e.Value(), &ss); err != nil {
				t.Fatal(err)
			}
			secret, err := sealed.Open(&ss, "n1", n1Key)
			if err != nil {
				t.Fatal(err)
			}
			return string(secret.Data["password"])
		}
		if e := nextUpdate(t, w); e == nil || e.Key() != "n1.default.db" || open(e) != "first" {
			t.Fatalf("the first entry of n1's watch is not its Secret")
		}
		if e := nextUpdate(t, w); e != nil {
			t.Fatalf("n1's watch: %s before the end of the initial values", e.Key())
		}
		putSecret("n1", n1XKey, "second")
		if e := nextUpdate(t, w); e == nil || open(e) != "second" {
			t.Errorf("n1's watch did not bring the update")
		}
		if err := w.Stop(); err != nil {
			t.Errorf("stop the watch (its consumer deleted): %v", err)
		}
		e, err := n1Sec.Get(ctx, "n1.default.db")
		if err != nil || open(e) != "second" {
			t.Errorf("get its own Secret as n1: %v", err)
		}
	})

	n2 := s.connect(t, "node-n2", nats.CustomInboxPrefix("_INBOX_n2"))
	n2Sec := keyValue(t, n2, schemas.BucketSecrets)
	t.Run("n2 cannot read n1's Secrets", func(t *testing.T) {
		n2.wantDenied(t, "publish", "$JS.API.DIRECT.GET.KV_jetlet_secrets.$KV.jetlet_secrets.n1.default.db", func(ctx context.Context) error {
			_, err := n2Sec.Get(ctx, "n1.default.db")
			return err
		})
		for _, filter := range []string{"$KV.jetlet_secrets.n1.>", "$KV.jetlet_secrets.>", "$KV.jetlet_secrets.*.default.db"} {
			n2.wantDenied(t, "publish", "$JS.API.CONSUMER.CREATE.KV_jetlet_secrets.peek."+filter, func(ctx context.Context) error {
				_, err := n2.js.CreateConsumer(ctx, "KV_jetlet_secrets", jetstream.ConsumerConfig{Name: "peek", FilterSubject: filter})
				return err
			})
		}
		// Requests whose body names the subject: any key, so none.
		n2.wantDenied(t, "publish", "$JS.API.CONSUMER.CREATE.KV_jetlet_secrets.peek", func(ctx context.Context) error {
			_, err := n2.js.CreateConsumer(ctx, "KV_jetlet_secrets", jetstream.ConsumerConfig{Name: "peek",
				FilterSubjects: []string{"$KV.jetlet_secrets.n2.>", "$KV.jetlet_secrets.n1.>"}})
			return err
		})
		for _, subject := range []string{"$JS.API.DIRECT.GET.KV_jetlet_secrets", "$JS.API.STREAM.MSG.GET.KV_jetlet_secrets"} {
			n2.wantDenied(t, "publish", subject, func(ctx context.Context) error {
				_, err := n2.nc.RequestWithContext(ctx, subject, []byte(`{"last_by_subj":"$KV.jetlet_secrets.n1.default.db"}`))
				return err
			})
		}
		// Its own it reads.
		if _, err := n2Sec.Get(ctx, "n2.default.db"); err != nil {
			t.Errorf("get its own Secret as n2: %v", err)
		}
	})
	t.Run("nodes write neither bucket", func(t *testing.T) {
		for _, subject := range []string{"$KV.jetlet_configmaps.default.app.config", "$KV.jetlet_secrets.n1.default.db"} {
			n1.wantDenied(t, "publish", subject, func(ctx context.Context) error {
				_, err := n1.js.Publish(ctx, subject, []byte("{}"))
				return err
			})
		}
	})
	t.Run("the auditor reads neither bucket", func(t *testing.T) {
		audit := s.connect(t, "auditor", nats.CustomInboxPrefix("_INBOX_auditor"))
		auditCM := keyValue(t, audit, schemas.BucketConfigMaps)
		auditSec := keyValue(t, audit, schemas.BucketSecrets)
		audit.wantDenied(t, "publish", "$JS.API.DIRECT.GET.KV_jetlet_configmaps.$KV.jetlet_configmaps.default.app.config", func(ctx context.Context) error {
			_, err := auditCM.Get(ctx, "default.app.config")
			return err
		})
		audit.wantDenied(t, "publish", "$JS.API.DIRECT.GET.KV_jetlet_secrets.$KV.jetlet_secrets.n1.default.db", func(ctx context.Context) error {
			_, err := auditSec.Get(ctx, "n1.default.db")
			return err
		})
	})
}

// keyValue binds bucket as u, which needs only the stream's info.
func keyValue(t *testing.T, u *userConn, bucket string) jetstream.KeyValue {
	t.Helper()
	kv, err := u.js.KeyValue(t.Context(), bucket)
	if err != nil {
		t.Fatalf("bucket %s: %v", bucket, err)
	}
	return kv
}

// nextUpdate is w's next entry; nil marks the end of the initial values.
func nextUpdate(t *testing.T, w jetstream.KeyWatcher) jetstream.KeyValueEntry {
	t.Helper()
	select {
	case e := <-w.Updates():
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no update from the watch within 10s")
		return nil
	}
}
