package client_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// serveStats answers node's stats endpoint with summary, as its jetlet does.
func (f *fleet) serveStats(node string, summary statsapi.Summary) {
	data, _ := json.Marshal(summary)
	subject := schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}.NodeService(node, schemas.EndpointStats)
	if _, err := f.js.Conn().Subscribe(subject, func(m *nats.Msg) { _ = m.Respond(data) }); err != nil {
		panic(err)
	}
	_ = f.js.Conn().Flush()
}

func container(name string, nanoCores, workingSet uint64) statsapi.ContainerStats {
	return statsapi.ContainerStats{Name: name,
		CPU:    &statsapi.CPUStats{UsageNanoCores: &nanoCores},
		Memory: &statsapi.MemoryStats{WorkingSetBytes: &workingSet}}
}

// kubectl top pods and top nodes from what each live node measures: a
// pod's containers added up, cpu in millicores rounded up, memory in Mi.
func ExampleClient_TopPods() {
	f := startFleet()
	defer f.stop()
	ctx := context.Background()
	f.heartbeat("n1", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi")}, false)
	node := uint64(1_500_000_000)
	f.serveStats("n1", statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "n1", CPU: &statsapi.CPUStats{UsageNanoCores: &node}},
		Pods: []statsapi.PodStats{
			{PodRef: statsapi.PodReference{Namespace: "default", Name: "web", UID: "u2"},
				Containers: []statsapi.ContainerStats{container("app", 999_999, 100<<20), container("proxy", 250_000_000, 20<<20)}},
			{PodRef: statsapi.PodReference{Namespace: "default", Name: "burn", UID: "u1"},
				Containers: []statsapi.ContainerStats{container("app", 1_000_000_001, 200<<20)}},
			{PodRef: statsapi.PodReference{Namespace: "other", Name: "db", UID: "u3"},
				Containers: []statsapi.ContainerStats{container("db", 0, 1<<30)}},
		},
	})

	c, err := client.Connect(ctx, client.Options{URL: f.url})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	pods, err := c.TopPods(ctx, "default", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range pods {
		u := p.Usage()
		fmt.Printf("%s/%s on %s: %dm %dMi\n", p.Namespace, p.Name, p.Node, u.Cpu().MilliValue(), u.Memory().Value()>>20)
	}
	nodes, err := c.TopNodes(ctx, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range nodes {
		fmt.Printf("%s: %dm of %s\n", n.Name, n.Usage.Cpu().MilliValue(), n.Allocatable.Cpu())
	}
	// Output:
	// default/burn on n1: 1001m 200Mi
	// default/web on n1: 251m 120Mi
	// n1: 1500m of 2
}
