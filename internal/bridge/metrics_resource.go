package bridge

import (
	"context"

	dto "github.com/prometheus/client_model/go"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// metricsResource is kubelet's /metrics/resource of the node, what
// metrics-server scrapes for `kubectl top`: the node's, its pods' and
// their containers' cpu time and working set, and the containers' start
// times, from the node's Summary, each sample at its stats' time.
func (a *kubeletAPI) metricsResource(ctx context.Context) ([]*dto.MetricFamily, error) {
	s, err := a.jetlet.Stats(ctx, a.node)
	if err != nil {
		return nil, err
	}
	return resourceMetrics(s), nil
}

// resourceMetrics are kubelet's resource metrics of a Summary.
func resourceMetrics(s *statsv1alpha1.Summary) []*dto.MetricFamily {
	families := map[string]*dto.MetricFamily{}
	var order []string
	add := func(name, help string, typ dto.MetricType, value float64, at int64, labels ...string) {
		f := families[name]
		if f == nil {
			f = &dto.MetricFamily{Name: &name, Help: &help, Type: &typ}
			families[name] = f
			order = append(order, name)
		}
		m := &dto.Metric{TimestampMs: &at}
		for i := 0; i+1 < len(labels); i += 2 {
			m.Label = append(m.Label, &dto.LabelPair{Name: &labels[i], Value: &labels[i+1]})
		}
		if typ == dto.MetricType_COUNTER {
			m.Counter = &dto.Counter{Value: &value}
		} else {
			m.Gauge = &dto.Gauge{Value: &value}
		}
		f.Metric = append(f.Metric, m)
	}
	cpu := func(name, help string, c *statsv1alpha1.CPUStats, labels ...string) {
		if c != nil && c.UsageCoreNanoSeconds != nil {
			add(name, help, dto.MetricType_COUNTER, float64(*c.UsageCoreNanoSeconds)/1e9, c.Time.UnixMilli(), labels...)
		}
	}
	memory := func(name, help string, m *statsv1alpha1.MemoryStats, labels ...string) {
		if m != nil && m.WorkingSetBytes != nil {
			add(name, help, dto.MetricType_GAUGE, float64(*m.WorkingSetBytes), m.Time.UnixMilli(), labels...)
		}
	}
	cpu("node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node in core-seconds", s.Node.CPU)
	memory("node_memory_working_set_bytes", "Current working set of the node in bytes", s.Node.Memory)
	for _, p := range s.Pods {
		pod := []string{"namespace", p.PodRef.Namespace, "pod", p.PodRef.Name}
		for _, c := range p.Containers {
			labels := append([]string{"container", c.Name}, pod...)
			cpu("container_cpu_usage_seconds_total", "Cumulative cpu time consumed by the container in core-seconds", c.CPU, labels...)
			memory("container_memory_working_set_bytes", "Current working set of the container in bytes", c.Memory, labels...)
			if c.StartTime.Unix() > 0 { // as kubelet: none for a container without one
				add("container_start_time_seconds", "Start time of the container since unix epoch in seconds", dto.MetricType_GAUGE,
					float64(c.StartTime.UnixNano())/1e9, c.StartTime.UnixMilli(), labels...)
			}
		}
		cpu("pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in core-seconds", p.CPU, pod...)
		memory("pod_memory_working_set_bytes", "Current working set of the pod in bytes", p.Memory, pod...)
	}
	zero, now := 0.0, s.Node.StartTime.UnixMilli()
	if s.Node.CPU != nil {
		now = s.Node.CPU.Time.UnixMilli()
	}
	add("resource_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", dto.MetricType_GAUGE, zero, now)
	out := make([]*dto.MetricFamily, len(order))
	for i, name := range order {
		out[i] = families[name]
	}
	return out
}
