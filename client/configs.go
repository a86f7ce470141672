package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/sealed"
)

// What storing a ConfigMap or a Secret did, as kubectl words it.
const (
	ConfigCreated    = "created"
	ConfigConfigured = "configured"
	ConfigUnchanged  = "unchanged"
)

// ConfigWrite is one value to put in a bucket: a ConfigMap, or a Secret
// sealed for one node. It holds no Secret's value in the clear.
type ConfigWrite struct {
	Kind            string // "ConfigMap" or "Secret"
	Namespace, Name string
	Node            string // the node a Secret is sealed for
	// Result is ConfigCreated, ConfigConfigured or ConfigUnchanged.
	Result string
	bucket string
	key    string
	value  []byte
}

// ConfigKey is the key of a ConfigMap in jetlet_configmaps, and of a
// Secret under its node's in jetlet_secrets.
func ConfigKey(namespace, name string) string { return namespace + "." + name }

// PrepareConfigMap compares cm with the one stored: a new one gets a uid
// and its creation time, a changed one keeps them. With create, one that
// exists is an error; so is a change of an immutable one that the API
// server refuses (ErrInvalid and schemas.ErrImmutable). Nothing is stored
// (StoreConfigs).
func (c *Client) PrepareConfigMap(ctx context.Context, cm *corev1.ConfigMap, create bool) (*ConfigWrite, error) {
	w := &ConfigWrite{Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name, bucket: schemas.BucketConfigMaps, key: ConfigKey(cm.Namespace, cm.Name), Result: ConfigCreated}
	label := "configmap/" + cm.Namespace + "/" + cm.Name
	old, err := c.getKV(ctx, w.bucket, w.key)
	if err != nil {
		return nil, err
	}
	if old != nil {
		if create {
			return nil, fmt.Errorf("%s already exists (jetlet apply -f replaces it)", label)
		}
		var stored corev1.ConfigMap
		if json.Unmarshal(old.Value(), &stored) == nil {
			if err := schemas.CheckConfigMapUpdate(&stored, cm); err != nil {
				return nil, errorOf(ErrInvalid, err, "%v (delete it and create it again to change it)", err)
			}
			cm.UID, cm.CreationTimestamp = stored.UID, stored.CreationTimestamp
		}
		w.Result = ConfigConfigured
	}
	if cm.UID == "" {
		cm.UID = types.UID(uuid.NewString())
	}
	if cm.CreationTimestamp.IsZero() {
		cm.CreationTimestamp = metav1.NewTime(time.Now().UTC())
	}
	if w.value, err = json.Marshal(cm); err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	if old != nil && bytes.Equal(old.Value(), w.value) {
		w.Result = ConfigUnchanged
	}
	return w, nil
}

// PrepareSecret seals s for each of nodes with the xkey of its record in
// jetlet_nodes (a node without one stops it, before anything is stored).
// Whether it was there is read from its key; what it held cannot be (it is
// sealed), so a Secret put again is "configured" even when nothing changed.
func (c *Client) PrepareSecret(ctx context.Context, s *corev1.Secret, nodes []string, create bool) ([]*ConfigWrite, error) {
	label := "secret/" + s.Namespace + "/" + s.Name
	if len(nodes) == 0 {
		return nil, errorOf(ErrInvalid, nil, "%s: a Secret is sealed for the nodes whose pods use it: give --node N or --nodes N1,N2", label)
	}
	xkeys, err := c.nodeXKeys(ctx, nodes)
	if err != nil {
		return nil, err
	}
	var out []*ConfigWrite
	for _, node := range nodes {
		w, err := SealSecret(s, node, xkeys[node])
		if err != nil {
			return nil, err
		}
		old, err := c.getKV(ctx, w.bucket, w.key)
		if err != nil {
			return nil, err
		}
		if old == nil {
			w.Result = ConfigCreated
		} else if create {
			return nil, fmt.Errorf("%s already exists on node %s (jetlet apply -f replaces it)", label, node)
		}
		out = append(out, w)
	}
	return out, nil
}

// SealSecret seals s for node with xkey, the curve public key of node's
// record (Node.Record.XKey), reading nothing: for a program that follows
// the node records already (WatchNodes) and stores many Secrets. Its
// Result is ConfigConfigured; StoreConfigs stores it.
func SealSecret(s *corev1.Secret, node, xkey string) (*ConfigWrite, error) {
	w := &ConfigWrite{Kind: "Secret", Namespace: s.Namespace, Name: s.Name, bucket: schemas.BucketSecrets, key: sealed.SecretKey(node, s.Namespace, s.Name), Node: node, Result: ConfigConfigured}
	ss, err := sealed.Seal(s, node, xkey)
	if err != nil {
		return nil, err // names the key, never the content
	}
	if w.value, err = json.Marshal(ss); err != nil {
		return nil, fmt.Errorf("secret/%s/%s: %w", s.Namespace, s.Name, err)
	}
	return w, nil
}

// nodeXKeys reads the curve public key of each node from its record in
// jetlet_nodes; a node without a record, or whose record has no xkey, is
// refused, naming it.
func (c *Client) nodeXKeys(ctx context.Context, nodes []string) (map[string]string, error) {
	recs, err := kvValues[schemas.NodeRecord](ctx, c, schemas.BucketNodes, ">")
	if err != nil {
		return nil, err
	}
	xkeys := map[string]string{}
	for _, r := range recs {
		xkeys[r.Node] = r.XKey
	}
	var problems []string
	for _, n := range nodes {
		xkey, known := xkeys[n]
		switch {
		case !known:
			problems = append(problems, fmt.Sprintf("node %s has no record in %s: a Secret is sealed for the key a running node publishes there (is `jetlet run --node %s` running against %s?)", n, schemas.BucketNodes, n, c.url))
		case xkey == "":
			problems = append(problems, fmt.Sprintf("node %s's record in %s has no xkey: its jetlet predates Secrets; upgrade it", n, schemas.BucketNodes))
		}
	}
	if problems != nil {
		return nil, errorOf(ErrNotFound, nil, "cannot seal Secrets: %s; nothing was stored", strings.Join(problems, "; "))
	}
	return xkeys, nil
}

// StoreConfigs puts each write, in order; the unchanged are skipped.
func (c *Client) StoreConfigs(ctx context.Context, writes []*ConfigWrite) error {
	for _, w := range writes {
		if w.Result == ConfigUnchanged {
			continue
		}
		kv, err := c.bucket(ctx, w.bucket)
		if err != nil {
			return err
		}
		// A Put stores the same value again if a lost answer makes it repeat.
		err = c.ridingOut(ctx, "bucket "+w.bucket, func(ctx context.Context) error {
			_, err := kv.Put(ctx, w.key, w.value)
			return err
		})
		if err != nil {
			return c.jsError(strings.ToLower(w.Kind)+"/"+w.Namespace+"/"+w.Name+": bucket "+w.bucket, err)
		}
	}
	return nil
}

// ConfigMaps returns the ConfigMaps of jetlet_configmaps whose keys match
// pattern (NAMESPACE.NAME, with wildcards), sorted by namespace and name.
func (c *Client) ConfigMaps(ctx context.Context, pattern string) ([]corev1.ConfigMap, error) {
	cms, err := kvValues[corev1.ConfigMap](ctx, c, schemas.BucketConfigMaps, pattern)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(cms, func(a, b corev1.ConfigMap) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return cms, nil
}

// DeleteConfigMap deletes a ConfigMap (a delete marker: the nodes' watches
// see it go). One that is not there is ErrNotFound.
func (c *Client) DeleteConfigMap(ctx context.Context, namespace, name string) error {
	key := ConfigKey(namespace, name)
	e, err := c.getKV(ctx, schemas.BucketConfigMaps, key)
	if err != nil {
		return err
	}
	if e == nil {
		return &NotFoundError{Msg: fmt.Sprintf("configmap %s/%s not found in %s", namespace, name, schemas.BucketConfigMaps)}
	}
	kv, err := c.bucket(ctx, schemas.BucketConfigMaps)
	if err != nil {
		return err
	}
	// At the revision read: a ConfigMap put meanwhile is not deleted unseen.
	if err := kv.Delete(ctx, key, jetstream.LastRevision(e.Revision())); err != nil {
		return c.jsError("bucket "+schemas.BucketConfigMaps, err)
	}
	return nil
}

// StoredSecret is a SealedSecret as stored for one node.
type StoredSecret struct {
	schemas.SealedSecret
	Key string
	Put time.Time
}

// SealedSecrets returns the SealedSecrets of jetlet_secrets whose keys
// match pattern (NODE.NAMESPACE.NAME, with wildcards), sorted by namespace,
// name and node; a value that is not one is skipped.
func (c *Client) SealedSecrets(ctx context.Context, pattern string) ([]StoredSecret, error) {
	kv, err := c.bucket(ctx, schemas.BucketSecrets)
	if err != nil {
		return nil, err
	}
	var out []StoredSecret
	err = watchInitial(ctx, kv, pattern, func(e jetstream.KeyValueEntry) {
		var s StoredSecret
		if e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &s.SealedSecret) == nil {
			s.Key, s.Put = e.Key(), e.Created()
			out = append(out, s)
		}
	})
	if err != nil {
		return nil, c.jsError("bucket "+schemas.BucketSecrets, err)
	}
	slices.SortFunc(out, func(a, b StoredSecret) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Node, b.Node))
	})
	return out, nil
}

// PurgeSecret purges a Secret's copy (no earlier revision of its
// ciphertext is kept in the bucket).
func (c *Client) PurgeSecret(ctx context.Context, s StoredSecret) error {
	kv, err := c.bucket(ctx, schemas.BucketSecrets)
	if err != nil {
		return err
	}
	if err := kv.Purge(ctx, s.Key); err != nil {
		return c.jsError("bucket "+schemas.BucketSecrets, err)
	}
	return nil
}
