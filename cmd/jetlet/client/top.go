package client

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
)

func newTopCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Show the CPU and memory the pods or the nodes use, as kubectl top",
		Long: `Show what the pods or the nodes use now, as kubectl top does, from each live
node's stats (its node service's stats endpoint, kubelet's Summary API):
CPU(cores) in millicores, over the window since the node was last asked
(a fresh node is asked twice, a second apart); MEMORY(bytes) in Mi, the
working set (usage less the inactive file cache), as metrics-server reports
them. Asking needs the operator's rights (docs/security.md).`,
	}
	cmd.AddCommand(newTopPodsCommand(), newTopNodesCommand())
	return cmd
}

type topPodsOptions struct {
	client        clientFlags
	namespace     string
	allNamespaces bool
	containers    bool
}

func newTopPodsCommand() *cobra.Command {
	var o topPodsOptions
	cmd := &cobra.Command{
		Use:     "pods",
		Aliases: []string{"pod", "po"},
		Short:   "Show the CPU and memory of the pods of a namespace (or of every one)",
		Long: `Show the CPU and memory of the pods of namespace -n (default "default"), or of
every namespace with -A, on every live node or on --node, as kubectl top pods:
a pod's figures are its running containers' added up; --containers prints a
line per container. CPU(cores) is <unknown> for a container the node has no
rate for yet (started within the last second).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringVarP(&o.namespace, "namespace", "n", "default", "the namespace to show")
	fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "show the pods of every namespace")
	fs.BoolVar(&o.containers, "containers", false, "a line per container")
	cli.AnnotateEnv(fs)
	return cmd
}

func (o *topPodsOptions) run(cmd *cobra.Command) error {
	if o.allNamespaces && cmd.Flags().Changed("namespace") {
		return fmt.Errorf("give -n NAMESPACE or -A, not both")
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	namespace := o.namespace
	if o.allNamespaces {
		namespace = ""
	}
	pods, err := c.TopPods(cmd.Context(), namespace, o.client.node)
	if len(pods) == 0 && err == nil {
		if o.allNamespaces {
			fmt.Fprintln(cmd.ErrOrStderr(), "No resources found")
		} else {
			fmt.Fprintf(cmd.ErrOrStderr(), "No resources found in %s namespace.\n", namespace)
		}
		return nil
	}
	if perr := printTopPods(cmd.OutOrStdout(), pods, o.allNamespaces, o.containers); perr != nil {
		return perr
	}
	return err
}

// printTopPods prints kubectl top pods' table.
func printTopPods(w io.Writer, pods []jc.PodTop, withNamespace, containers bool) error {
	tw := newTable(w)
	var head []string
	if withNamespace {
		head = append(head, "NAMESPACE")
	}
	if containers {
		head = append(head, "POD")
	}
	writeRow(tw, append(head, "NAME", "CPU(cores)", "MEMORY(bytes)")...)
	for _, p := range pods {
		var lead []string
		if withNamespace {
			lead = append(lead, p.Namespace)
		}
		if !containers {
			writeRow(tw, append(lead, p.Name, cpuCell(p.Usage(), allRated(p)), memoryCell(p.Usage()))...)
			continue
		}
		for _, ctr := range p.Containers {
			_, rated := ctr.Usage[corev1.ResourceCPU]
			writeRow(tw, append(lead, p.Name, ctr.Name, cpuCell(ctr.Usage, rated), memoryCell(ctr.Usage))...)
		}
	}
	return tw.Flush()
}

// allRated says whether the node has a CPU rate for each of p's containers.
func allRated(p jc.PodTop) bool {
	for _, c := range p.Containers {
		if _, ok := c.Usage[corev1.ResourceCPU]; !ok {
			return false
		}
	}
	return true
}

type topNodesOptions struct {
	client clientFlags
}

func newTopNodesCommand() *cobra.Command {
	var o topNodesOptions
	cmd := &cobra.Command{
		Use:     "nodes",
		Aliases: []string{"node", "no"},
		Short:   "Show the CPU and memory of the live nodes",
		Long: `Show the CPU and memory each live node (or --node) uses, as kubectl top nodes:
the whole machine's (/proc/stat's busy time; the root cgroup's working set),
and CPU% and MEMORY% of the node's allocatable (its record's).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	cli.AnnotateEnv(fs)
	return cmd
}

func (o *topNodesOptions) run(cmd *cobra.Command) error {
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	nodes, err := c.TopNodes(cmd.Context(), o.client.node)
	if len(nodes) == 0 && err == nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "No live nodes found.")
		return nil
	}
	if perr := printTopNodes(cmd.OutOrStdout(), nodes); perr != nil {
		return perr
	}
	return err
}

// printTopNodes prints kubectl top nodes' table.
func printTopNodes(w io.Writer, nodes []jc.NodeTop) error {
	tw := newTable(w)
	writeRow(tw, "NAME", "CPU(cores)", "CPU%", "MEMORY(bytes)", "MEMORY%")
	for _, n := range nodes {
		_, rated := n.Usage[corev1.ResourceCPU]
		writeRow(tw, n.Name,
			cpuCell(n.Usage, rated), percentCell(n.Usage, n.Allocatable, corev1.ResourceCPU, rated),
			memoryCell(n.Usage), percentCell(n.Usage, n.Allocatable, corev1.ResourceMemory, true))
	}
	return tw.Flush()
}

const unknownCell = "<unknown>"

// cpuCell is kubectl top's CPU(cores): millicores, rounded up.
func cpuCell(usage corev1.ResourceList, rated bool) string {
	if !rated {
		return unknownCell
	}
	q := usage[corev1.ResourceCPU]
	return strconv.FormatInt(q.MilliValue(), 10) + "m"
}

// memoryCell is kubectl top's MEMORY(bytes): whole Mi, rounded down.
func memoryCell(usage corev1.ResourceList) string {
	q, ok := usage[corev1.ResourceMemory]
	if !ok {
		return unknownCell
	}
	return strconv.FormatInt(q.Value()/(1<<20), 10) + "Mi"
}

// percentCell is kubectl top nodes' share of the allocatable, rounded down.
func percentCell(usage, allocatable corev1.ResourceList, name corev1.ResourceName, known bool) string {
	q, ok := usage[name]
	a, hasAllocatable := allocatable[name]
	if !known || !ok || !hasAllocatable {
		return unknownCell
	}
	fraction := 0.0
	if !a.IsZero() {
		fraction = float64(q.MilliValue()) / float64(a.MilliValue()) * 100
	}
	return strconv.FormatInt(int64(fraction), 10) + "%"
}
