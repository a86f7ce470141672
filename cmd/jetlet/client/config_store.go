package client

import (
	"context"
	"fmt"
	"io"

	jc "github.com/jetlet/jetlet/client"
)

// configWrite is one value to put in a bucket, with the object it stores.
type configWrite struct {
	*jc.ConfigWrite
	obj *configObject
}

// line is what apply and create print for the write.
func (w *configWrite) line() string {
	if w.Node != "" {
		return fmt.Sprintf("%s sealed for node %s (%s)", w.obj.label(), w.Node, w.Result)
	}
	return w.obj.label() + " " + w.Result
}

// lineJSON is what -o json prints for the write: names and what was done,
// never a value.
func (w *configWrite) lineJSON() map[string]any {
	out := map[string]any{"result": w.Result, "kind": w.Kind, "namespace": w.Namespace, "name": w.Name}
	if w.Kind == kindSecret {
		out["node"] = w.Node
	}
	return out
}

// prepareConfigs reads what storing objs needs and seals each Secret for
// each of nodes, putting nothing: a node with no record, or an object that
// exists when create says it must not, stops it before anything is stored.
func prepareConfigs(ctx context.Context, c *jc.Client, objs []*configObject, nodes []string, create bool) ([]*configWrite, error) {
	var writes []*configWrite
	for _, o := range objs {
		if o.configMap != nil {
			w, err := c.PrepareConfigMap(ctx, o.configMap, create)
			if err != nil {
				return nil, err
			}
			writes = append(writes, &configWrite{w, o})
			continue
		}
		ws, err := c.PrepareSecret(ctx, o.secret.secret, nodes, create)
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			writes = append(writes, &configWrite{w, o})
		}
	}
	return writes, nil
}

// storeConfigs puts each write, in order.
func storeConfigs(ctx context.Context, c *jc.Client, writes []*configWrite) error {
	ws := make([]*jc.ConfigWrite, len(writes))
	for i, w := range writes {
		ws[i] = w.ConfigWrite
	}
	return c.StoreConfigs(ctx, ws)
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
