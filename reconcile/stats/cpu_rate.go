package stats

import "time"

// cpuSample is one reading of a cumulative CPU counter: at is when it was
// read (ns since the epoch), usage the core-nanoseconds used by then.
type cpuSample struct {
	at    int64
	usage uint64
}

// nanoCores is the CPU rate between two samples of one counter, in
// core-nanoseconds per second, as kubelet's CRI stats provider derives
// usageNanoCores: nil when there is no earlier sample (at 0), when the
// counter went back (a container restarted under the same id) or time did
// not advance, and when the earlier sample is older than maxWindow, whose
// average would hide what the figure is asked for.
func nanoCores(prev, cur cpuSample, maxWindow time.Duration) *uint64 {
	elapsed := cur.at - prev.at
	if prev.at == 0 || cur.usage < prev.usage || elapsed <= 0 || elapsed > maxWindow.Nanoseconds() {
		return nil
	}
	n := uint64(float64(cur.usage-prev.usage) / float64(elapsed) * float64(time.Second))
	return &n
}

// cpuRates keeps the last sample of each counter (the node's, each pod's and
// each container's, by key) from one Summary to the next. It is owned by
// its Provider, under the Provider's lock.
type cpuRates struct {
	minWindow, maxWindow time.Duration
	last                 map[string]cpuRecord
	next                 map[string]cpuRecord
}

// cpuRecord is a counter's sample and the rate that was taken up to it.
type cpuRecord struct {
	cpuSample
	rate *uint64
}

// rate records cur as key's newest sample and returns the rate since the
// one before. Within minWindow of that one, cur is not kept: the rate
// taken up to it is returned again, so that asking often (a heartbeat sent
// early for a change) does not average over a moment.
func (r *cpuRates) rate(key string, cur cpuSample) *uint64 {
	if r.next == nil {
		r.next = map[string]cpuRecord{}
	}
	prev, ok := r.last[key]
	if ok && cur.at-prev.at < r.minWindow.Nanoseconds() && cur.usage >= prev.usage {
		r.next[key] = prev
		return prev.rate
	}
	rate := nanoCores(prev.cpuSample, cur, r.maxWindow)
	r.next[key] = cpuRecord{cpuSample: cur, rate: rate}
	return rate
}

// done ends one Summary: the counters not read in it (containers and pods
// gone) are forgotten.
func (r *cpuRates) done() {
	r.last, r.next = r.next, nil
}
