package configcache_test

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkPutToCache measures the figure from a ConfigMap's KV put
// to the cache holding it (as Changed announces it, after the cache):
// run with -benchtime=100x for p50 and p99 over 100 updates.
func BenchmarkPutToCache(b *testing.B) {
	e, o := running(b)
	took := make([]time.Duration, 0, b.N)
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		ref := e.putConfigMap(b, configMap("default", "app", map[string]string{"i": fmt.Sprint(i)}))
		o.waitChanged(b, ref)
		took = append(took, time.Since(start))
		if cm, err := o.ConfigMap("default", "app"); err != nil || cm.Data["i"] != fmt.Sprint(i) {
			b.Fatalf("update %d: %v, %v", i, cm, err)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}
