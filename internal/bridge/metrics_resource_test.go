package bridge

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestResourceMetrics(t *testing.T) {
	at := metav1.NewTime(time.Unix(1000, 0))
	u := func(v uint64) *uint64 { return &v }
	s := &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{NodeName: "n1", CPU: &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: u(2_500_000_000)},
			Memory: &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: u(4096)}},
		Pods: []statsv1alpha1.PodStats{{
			PodRef: statsv1alpha1.PodReference{Name: "web", Namespace: "default"},
			CPU:    &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: u(1_000_000_000)},
			Containers: []statsv1alpha1.ContainerStats{{Name: "app", StartTime: at,
				CPU:    &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: u(500_000_000)},
				Memory: &statsv1alpha1.MemoryStats{Time: at}}}, // no working set: no sample
		}, {
			PodRef: statsv1alpha1.PodReference{Name: "new", Namespace: "default"},
			// No start time: no sample (a zero one is a negative timestamp,
			// which metrics-server's parser refuses, failing the scrape).
			Containers: []statsv1alpha1.ContainerStats{{Name: "app", CPU: &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: u(1)}}},
		}},
	}
	var out bytes.Buffer
	for _, f := range resourceMetrics(s) {
		if _, err := expfmt.MetricFamilyToText(&out, f); err != nil {
			t.Fatal(err)
		}
	}
	text := out.String()
	for _, want := range []string{
		"node_cpu_usage_seconds_total 2.5 1000000",
		"node_memory_working_set_bytes 4096 1000000",
		`container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 0.5 1000000`,
		`container_start_time_seconds{container="app",namespace="default",pod="web"} 1000 1000000`,
		`pod_cpu_usage_seconds_total{namespace="default",pod="web"} 1 1000000`,
		"resource_scrape_error 0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, "container_memory_working_set_bytes") {
		t.Errorf("a working set the summary has not:\n%s", text)
	}
	if strings.Contains(text, `container_start_time_seconds{container="app",namespace="default",pod="new"}`) {
		t.Errorf("a start time the summary has not:\n%s", text)
	}
}
