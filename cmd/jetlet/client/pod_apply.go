package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

// applyOptions is what `jetlet apply` is told.
type applyOptions struct {
	client  clientFlags
	publish publishFlags
	files   []string
	nodes   []string // the nodes Secrets are sealed for, with --node
	force   bool     // publish a pod even when unchanged
	dryRun  string   // "node": show each pod's node's plan, publish nothing
}

func newApplyCommand() *cobra.Command {
	var o applyOptions
	cmd := &cobra.Command{
		Use:   "apply -f FILE|-",
		Short: "Publish Pods (YAML or JSON) or PodIntents as intents for a node; store ConfigMaps and Secrets",
		Long: `Publish each Pod of a Kubernetes manifest (YAML, several documents
separated by ---, or JSON, or a v1 List) or each PodIntent as an intent to
<prefix>.intent.<node>.<uid>.

A pod with no metadata.uid keeps the uid of the pod of the same namespace and
name on that node (from jetlet_status, else JETLET_INTENTS), or gets a new one.
The namespace defaults to "default" and the revision to one above the highest
seen for that uid. Every document is validated as the node would validate it
before anything is published. --node defaults to spec.nodeName, else to the
only node with a heartbeat in jetlet_nodes.

A pod whose metadata and spec equal those of its newest intent (an apply) is
not published again: it is reported "unchanged", as kubectl does. --force
publishes it anyway, at the next revision. A PodIntent that sets its revision
is always published. A pod for a node with no live heartbeat in jetlet_nodes
is published with a warning on stderr: the node applies it when its jetlet
runs again.

A ConfigMap is put to jetlet_configmaps. A Secret is sealed for each node of
--node or --nodes with the xkey of its record in jetlet_nodes and put to
jetlet_secrets; a node with no record stores nothing. ConfigMaps and Secrets
are stored before the pods' intents are published.

--dry-run=node publishes and stores nothing: each pod's node answers, over
its node service, with its verdict against the pod as it runs there now:
the Rejected error validation would give, admission's verdict on a new pod,
and the plan its next sync would make (sandbox kept or created; each
container kept, started, killed or restarted, with kubelet's reason). -o
json prints each plan as a JSON line.

Exit status: 0 when published or unchanged (with --wait: when every result
is Synced), 2 when a result is not Synced, 3 with --wait when a pod's node
has no live heartbeat (its intent is published, no result awaited), 1 on
any other error.`,
		Example: `  jetlet apply -f deploy/examples/web.yaml
  jetlet apply -f app-config.yaml -f db-secret.yaml --nodes n1,n2
  jetlet apply -f web.yaml --wait
  jetlet apply -f web.yaml --force
  jetlet apply -f web.yaml --dry-run=node
  cat pods.yaml | jetlet apply -f - --node n1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringArrayVarP(&o.files, "filename", "f", nil, "manifest file, or - for standard input (repeatable)")
	o.publish.register(cmd, "wait for each intent's SyncResult, showing the pod's events on stderr")
	fs.StringSliceVar(&o.nodes, "nodes", nil, "seal each Secret for these nodes (N1,N2); pods go to --node")
	fs.BoolVar(&o.force, "force", false, "publish each pod even when it equals its newest intent")
	fs.StringVar(&o.dryRun, "dry-run", "", "node: publish and store nothing; show what each pod's node would do (validation, admission, and its sync's plan against the pod as it runs)")
	_ = cmd.MarkFlagRequired("filename")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	cli.AnnotateEnv(fs)
	return cmd
}

// plannedIntent is one validated intent, ready to publish.
type plannedIntent struct {
	*jc.Intent
	label string // pod/NAMESPACE/NAME
	// nodeDown says why the node has no live heartbeat ("" when live or
	// not checked): --wait does not wait for it.
	nodeDown string
}

func (o *applyOptions) run(cmd *cobra.Command) error {
	if err := o.publish.validate(); err != nil {
		return err
	}
	switch {
	case o.dryRun != "" && o.dryRun != dryRunNode:
		return fmt.Errorf("--dry-run %q: want node (the node's plan; nothing is published)", o.dryRun)
	case o.dryRun != "" && o.publish.wait:
		return errors.New("--dry-run=node publishes nothing for --wait to wait for")
	}
	var docs []*document
	for _, f := range o.files {
		data, source, err := readInput(cmd.InOrStdin(), f)
		if err != nil {
			return err
		}
		more, err := parseManifest(data, source)
		if err != nil {
			return err
		}
		docs = append(docs, more...)
	}
	sealFor, err := secretNodes(o.client.node, o.nodes)
	if err != nil {
		return err
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), o.publish.timeout)
	defer cancel()

	p := newPlanner(c, o.client.node)
	p.Force = o.force
	var plans []*plannedIntent
	var configs []*configObject
	var problems []string
	for _, d := range docs {
		var err error
		if d.config != nil {
			var obj *configObject
			if obj, err = decodeConfig(d); err == nil {
				configs = append(configs, obj)
			}
		} else {
			var pi *plannedIntent
			if pi, err = p.plan(ctx, d); err == nil {
				plans = append(plans, pi)
			}
		}
		if err != nil {
			var invalid *invalidIntentError
			if !errors.As(err, &invalid) {
				return err
			}
			problems = append(problems, invalid.Error())
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "error: nothing was published:\n%s", strings.Join(problems, ""))
		return cli.ExitCodeError{Code: 1}
	}
	if o.dryRun == dryRunNode {
		// Nothing is stored: neither the intents nor the ConfigMaps and
		// Secrets beside them.
		return showPlans(ctx, cmd.OutOrStdout(), c, plans, o.publish.output)
	}
	// Stored before the intents: a pod that uses them finds them.
	writes, err := prepareConfigs(ctx, c, configs, sealFor, false)
	if err != nil {
		return err
	}
	if err := storeConfigs(ctx, c, writes); err != nil {
		return err
	}
	if err := reportConfigWrites(cmd.OutOrStdout(), cmd.ErrOrStderr(), writes, o.publish); err != nil {
		return err
	}
	if len(plans) == 0 {
		return nil
	}
	if err := checkNodesLive(ctx, c, plans, cmd.ErrOrStderr()); err != nil {
		return err
	}
	return publishAndReport(ctx, cmd, c, plans, o.publish)
}

// publishFlags are the flags of the commands that publish intents (apply and
// delete).
type publishFlags struct {
	wait    bool
	timeout time.Duration
	output  string
}

func (f *publishFlags) register(cmd *cobra.Command, waitHelp string) {
	fs := cmd.Flags()
	fs.BoolVar(&f.wait, "wait", false, waitHelp)
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "how long --wait waits")
	fs.StringVarP(&f.output, "output", "o", "", "json: print the result (or, without --wait, what was published) as JSON lines")
	completeOutput(cmd, outputJSON)
}

func (f *publishFlags) validate() error {
	if err := checkOutput(f.output, outputJSON); err != nil {
		return err
	}
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %s: must be positive", f.timeout)
	}
	return nil
}

// publishAndReport publishes every planned intent and then reports each, or,
// with --wait, waits for each result and reports that.
func publishAndReport(ctx context.Context, cmd *cobra.Command, c *jc.Client, plans []*plannedIntent, f publishFlags) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	for _, pi := range plans {
		if !pi.Unchanged {
			if err := c.Publish(ctx, pi.Intent); err != nil {
				return err
			}
		}
		line := appliedLine(pi)
		switch {
		case f.wait && !pi.Unchanged:
			fmt.Fprintln(stderr, line)
		case f.output == outputJSON:
			if err := printJSONLine(stdout, publishedJSON(pi)); err != nil {
				return err
			}
		default:
			fmt.Fprintln(stdout, line)
		}
	}
	if !f.wait {
		return nil
	}
	code, notLive := 0, false
	for _, pi := range plans {
		if pi.nodeDown != "" {
			fmt.Fprintf(stderr, "error: not waiting for %s: node %s is not live (%s); its intent is stored and applied once `jetlet run --node %s` runs\n",
				pi.label, pi.Node, pi.nodeDown, pi.Node)
			notLive = true
		}
	}
	for _, pi := range plans {
		if pi.Unchanged || pi.nodeDown != "" {
			continue
		}
		res, err := waitResult(ctx, c, pi, stderr)
		if err != nil {
			return err
		}
		if f.output == outputJSON {
			fmt.Fprintf(stdout, "%s\n", res.Raw)
		} else {
			printResult(stdout, pi.label, res.SyncResult)
		}
		if res.Outcome != schemas.OutcomeSynced {
			code = 2
		}
	}
	if code == 0 && notLive {
		code = exitNodeNotLive
	}
	if code != 0 {
		return cli.ExitCodeError{Code: code}
	}
	return nil
}

func appliedLine(pi *plannedIntent) string {
	verb := "applied"
	switch {
	case pi.Unchanged:
		verb = "unchanged"
	case pi.Op == schemas.OpDelete:
		verb = "delete requested"
	}
	dup := ""
	if pi.Duplicate {
		dup = ", already published: not sent again"
	}
	return fmt.Sprintf("%s %s on node %s (uid %s, revision %d, intent %d%s)", pi.label, verb, pi.Node, pi.UID, pi.Revision, pi.Seq, dup)
}

// publishedJSON is what `apply -o json` prints for an intent it published.
func publishedJSON(pi *plannedIntent) map[string]any {
	ns, name, _ := strings.Cut(strings.TrimPrefix(pi.label, "pod/"), "/")
	return map[string]any{
		"node": pi.Node, "uid": pi.UID, "namespace": ns, "name": name,
		"op": pi.Op, "revision": pi.Revision, "intentSeq": pi.Seq, "duplicate": pi.Duplicate,
		"unchanged": pi.Unchanged,
	}
}

// readInput reads a file, or standard input for "-".
func readInput(stdin io.Reader, name string) ([]byte, string, error) {
	if name == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, "", fmt.Errorf("reading standard input: %w", err)
		}
		return data, "<stdin>", nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, "", err
	}
	return data, name, nil
}

// invalidIntentError is a document that fails validation; it is reported with
// the others before anything is published.
type invalidIntentError struct {
	where, label string
	reasons      []string
}

func (e *invalidIntentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s) is invalid:\n", e.label, e.where)
	for _, r := range e.reasons {
		fmt.Fprintf(&b, "  %s\n", r)
	}
	return b.String()
}

// planner turns documents into intents (jc.Planner), resolving each
// pod's node: --node, else its spec.nodeName, else the only live node.
type planner struct {
	*jc.Planner
	c        *jc.Client
	flagNode string
	only     string // the only live node, once looked up
}

func newPlanner(c *jc.Client, node string) *planner {
	return &planner{Planner: c.NewPlanner(), c: c, flagNode: node}
}

func (p *planner) node(ctx context.Context, d *document) (string, error) {
	switch {
	case p.flagNode != "":
		return p.flagNode, nil
	case d.nodeName() != "":
		if !schemas.ValidNodeName(d.nodeName()) {
			return "", &invalidIntentError{d.where, d.label(), []string{fmt.Sprintf("pod.spec.nodeName %q: not a node name (a DNS-1123 label)", d.nodeName())}}
		}
		return d.nodeName(), nil
	case p.only == "":
		var err error
		if p.only, err = p.c.DefaultNode(ctx); err != nil {
			return "", err
		}
	}
	return p.only, nil
}

// plan fills in the document's namespace, uid and revision and validates the
// intent as the node will.
func (p *planner) plan(ctx context.Context, d *document) (*plannedIntent, error) {
	node, err := p.node(ctx, d)
	if err != nil {
		return nil, err
	}
	label := d.label()
	in, err := p.Plan(ctx, node, d.envelope)
	if invalid, ok := errors.AsType[*jc.InvalidError](err); ok {
		return nil, &invalidIntentError{d.where, label, invalid.Reasons}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.where, err)
	}
	return &plannedIntent{Intent: in, label: label}, nil
}
