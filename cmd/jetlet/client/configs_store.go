package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/sealed"
)

// What storing a ConfigMap or a Secret did, as kubectl words it.
const (
	resultCreated    = "created"
	resultConfigured = "configured"
	resultUnchanged  = "unchanged"
)

// configWrite is one value to put in a bucket: a ConfigMap, or a Secret
// sealed for one node.
type configWrite struct {
	obj    *configObject
	bucket string
	key    string
	node   string // the node a Secret is sealed for
	value  []byte
	result string
}

// line is what apply and create print for the write.
func (w *configWrite) line() string {
	if w.node != "" {
		return fmt.Sprintf("%s sealed for node %s (%s)", w.obj.label(), w.node, w.result)
	}
	return w.obj.label() + " " + w.result
}

// lineJSON is what -o json prints for the write: names and what was done,
// never a value.
func (w *configWrite) lineJSON() map[string]any {
	out := map[string]any{"result": w.result}
	if w.obj.configMap != nil {
		out["kind"], out["namespace"], out["name"] = kindConfigMap, w.obj.configMap.Namespace, w.obj.configMap.Name
	} else {
		s := w.obj.secret.secret
		out["kind"], out["namespace"], out["name"], out["node"] = kindSecret, s.Namespace, s.Name, w.node
	}
	return out
}

// prepareConfigs reads what storing objs needs (the ConfigMaps stored now,
// the nodes' xkeys) and seals each Secret for each of nodes, putting
// nothing: a node with no record, or an object that exists when create
// says it must not, stops it before anything is stored.
func (c *client) prepareConfigs(ctx context.Context, objs []*configObject, nodes []string, create bool) ([]*configWrite, error) {
	var xkeys map[string]string
	for _, o := range objs {
		if o.secret == nil {
			continue
		}
		if len(nodes) == 0 {
			return nil, fmt.Errorf("%s: a Secret is sealed for the nodes whose pods use it: give --node N or --nodes N1,N2", o.label())
		}
		if xkeys == nil {
			var err error
			if xkeys, err = c.nodeXKeys(ctx, nodes); err != nil {
				return nil, err
			}
		}
	}
	var writes []*configWrite
	for _, o := range objs {
		var more []*configWrite
		var err error
		if o.configMap != nil {
			more, err = c.prepareConfigMap(ctx, o, create)
		} else {
			more, err = c.prepareSecret(ctx, o, nodes, xkeys, create)
		}
		if err != nil {
			return nil, err
		}
		writes = append(writes, more...)
	}
	return writes, nil
}

// prepareConfigMap compares the ConfigMap with the one stored: a new one
// gets a uid and its creation time, a changed one keeps them.
func (c *client) prepareConfigMap(ctx context.Context, o *configObject, create bool) ([]*configWrite, error) {
	cm := o.configMap
	w := &configWrite{obj: o, bucket: schemas.BucketConfigMaps, key: objectKey(cm.Namespace, cm.Name), result: resultCreated}
	old, err := c.getKV(ctx, w.bucket, w.key)
	if err != nil {
		return nil, err
	}
	if old != nil {
		if create {
			return nil, fmt.Errorf("%s already exists (jetlet apply -f replaces it)", o.label())
		}
		var stored struct{ Metadata metav1.ObjectMeta }
		if json.Unmarshal(old.Value(), &stored) == nil {
			cm.UID, cm.CreationTimestamp = stored.Metadata.UID, stored.Metadata.CreationTimestamp
		}
		w.result = resultConfigured
	}
	if cm.UID == "" {
		cm.UID = types.UID(uuid.NewString())
	}
	if cm.CreationTimestamp.IsZero() {
		cm.CreationTimestamp = metav1.NewTime(time.Now().UTC())
	}
	if w.value, err = json.Marshal(cm); err != nil {
		return nil, fmt.Errorf("%s: %w", o.label(), err)
	}
	if old != nil && bytes.Equal(old.Value(), w.value) {
		w.result = resultUnchanged
	}
	return []*configWrite{w}, nil
}

// prepareSecret seals the Secret for each node. Whether it was there is
// read from its key; what it held cannot be (it is sealed), so a Secret
// applied again is "configured" even when nothing changed.
func (c *client) prepareSecret(ctx context.Context, o *configObject, nodes []string, xkeys map[string]string, create bool) ([]*configWrite, error) {
	s := o.secret.secret
	var out []*configWrite
	for _, node := range nodes {
		w := &configWrite{obj: o, bucket: schemas.BucketSecrets, key: sealed.SecretKey(node, s.Namespace, s.Name), node: node, result: resultCreated}
		old, err := c.getKV(ctx, w.bucket, w.key)
		if err != nil {
			return nil, err
		}
		if old != nil {
			if create {
				return nil, fmt.Errorf("%s already exists on node %s (jetlet apply -f replaces it)", o.label(), node)
			}
			w.result = resultConfigured
		}
		ss, err := sealed.Seal(s, node, xkeys[node])
		if err != nil {
			return nil, err // names the key, never the content
		}
		if w.value, err = json.Marshal(ss); err != nil {
			return nil, fmt.Errorf("%s: %w", o.label(), err)
		}
		out = append(out, w)
	}
	return out, nil
}

// getKV is the entry of key in bucket, nil when there is none.
func (c *client) getKV(ctx context.Context, bucket, key string) (jetstream.KeyValueEntry, error) {
	kv, err := c.bucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	var e jetstream.KeyValueEntry
	err = c.ridingOut(ctx, "bucket "+bucket, func(ctx context.Context) (err error) {
		e, err = kv.Get(ctx, key)
		return err
	})
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return nil, nil
	case err != nil:
		return nil, c.jsError("bucket "+bucket, err)
	}
	return e, nil
}

// nodeXKeys reads the curve public key of each node from its record in
// jetlet_nodes; a node without a record, or whose record has no xkey, is
// refused, naming it.
func (c *client) nodeXKeys(ctx context.Context, nodes []string) (map[string]string, error) {
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
		return nil, fmt.Errorf("cannot seal Secrets: %s; nothing was stored", strings.Join(problems, "; "))
	}
	return xkeys, nil
}

// storeConfigs puts each write, in order.
func (c *client) storeConfigs(ctx context.Context, writes []*configWrite) error {
	for _, w := range writes {
		if w.result == resultUnchanged {
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
			return c.jsError(w.obj.label()+": bucket "+w.bucket, err)
		}
	}
	return nil
}

// reportConfigWrites prints a line per write: on stderr beside --wait's
// results, as JSON lines with -o json.
func reportConfigWrites(stdout, stderr io.Writer, writes []*configWrite, f publishFlags) error {
	for _, w := range writes {
		switch {
		case f.wait:
			fmt.Fprintln(stderr, w.line())
		case f.output == outputJSON:
			if err := printJSONLine(stdout, w.lineJSON()); err != nil {
				return err
			}
		default:
			fmt.Fprintln(stdout, w.line())
		}
	}
	return nil
}
