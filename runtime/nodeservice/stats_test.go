package nodeservice_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/jetlet/jetlet/runtime/nodeservice"
	"github.com/jetlet/jetlet/runtime/nodeservice/nodeclient"
	"github.com/jetlet/jetlet/schemas"
)

// The stats endpoint answers with the Summary the node measures, in
// kubelet's JSON (its field names), and a failed measurement with a 500.
func TestStats(t *testing.T) {
	var fail atomic.Bool // set by the test, read by the handler
	summary := &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "n1", CPU: &statsapi.CPUStats{Time: metav1.Unix(1700000000, 0), UsageNanoCores: new(uint64(1e9))}},
		Pods: []statsapi.PodStats{{
			PodRef:     statsapi.PodReference{Namespace: "default", Name: "web", UID: "u1"},
			Containers: []statsapi.ContainerStats{{Name: "app", Memory: &statsapi.MemoryStats{WorkingSetBytes: new(uint64(200 << 20))}}},
		}},
	}
	_, client := serve(t, &podRuntime{}, nodeservice.Config{Summary: func(context.Context) (*statsapi.Summary, error) {
		if fail.Load() {
			return nil, errors.New("the runtime is down")
		}
		return summary, nil
	}})
	got, err := nodeclient.Stats(t.Context(), client, subj, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if *got.Node.CPU.UsageNanoCores != 1e9 || *got.Pods[0].Containers[0].Memory.WorkingSetBytes != 200<<20 {
		t.Errorf("summary %+v", got)
	}
	raw, err := client.Request(subj.NodeService("n1", schemas.EndpointStats), nil, nodeclient.FirstReplyTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var shape struct {
		Node map[string]any   `json:"node"`
		Pods []map[string]any `json:"pods"`
	}
	if err := json.Unmarshal(raw.Data, &shape); err != nil {
		t.Fatal(err)
	}
	if shape.Node["nodeName"] != "n1" || shape.Node["cpu"].(map[string]any)["usageNanoCores"] != 1e9 || shape.Pods[0]["podRef"].(map[string]any)["uid"] != "u1" {
		t.Errorf("the reply is not kubelet's JSON: %s", raw.Data)
	}
	fail.Store(true)
	_, err = nodeclient.Stats(t.Context(), client, subj, "n1")
	wantCode(t, err, schemas.ServiceErrInternal)
	if !strings.Contains(err.Error(), "the runtime is down") {
		t.Errorf("error %v", err)
	}
}
