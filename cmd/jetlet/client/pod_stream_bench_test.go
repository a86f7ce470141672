package client

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"

	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// BenchmarkStreamFigures measures docs/wire-protocol.md's stream figures
// once, whatever b.N: the keystroke echo round trip of exec -it (a key
// typed at a pty to its echo by the container's terminal), port-forward
// throughput with 100 connections at once against a direct loopback TCP
// copy of the same bytes in the same run and the CPU time the node and
// the CLI spent per MiB of it, and the resident memory of the
// node (jetlet run, with its embedded NATS server) and of the CLI
// (jetlet port-forward) while a 1 GiB transfer goes to a slow reader.
//
//	go test -run '^$' -bench StreamFigures -benchtime 1x ./cmd/jetlet/client
func BenchmarkStreamFigures(b *testing.B) {
	node, c := startJetletRun(b, "bench")
	wantCode(b, c.runIn(commandPod("bench", "mkdir -p /www && head -c 10485760 /dev/urandom > /www/m10 && "+
		"head -c 1073741824 /dev/zero > /www/g1 && exec httpd -f -p 8080 -h /www"), "apply", "-f", "-", "--wait"), 0)
	poll.Until(b, 120*time.Second, func() string { return "the pod's files" }, func() bool {
		return c.exec("default/bench", "--", "sh", "-c", "[ $(wc -c < /www/g1) = 1073741824 ]").code == 0
	})
	b.ResetTimer()

	// Keystroke echo: 300 keys, each typed once the last one's echo came.
	cmd := exec.Command(jetlettest.Binary(b), "exec", "--nats-url", c.url, "-it", "default/bench", "--", "cat")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := term.MakeRaw(int(tty.Fd())); err != nil {
		b.Fatal(err)
	}
	r := bufio.NewReader(tty)
	echo := func(key byte) time.Duration {
		start := time.Now()
		if _, err := tty.Write([]byte{key}); err != nil {
			b.Fatal(err)
		}
		for {
			got, err := r.ReadByte()
			if err != nil {
				b.Fatal(err)
			}
			if got == key {
				return time.Since(start)
			}
		}
	}
	echo('!') // the stream is up
	var rtts []time.Duration
	for i := range 300 {
		rtts = append(rtts, echo(byte('a'+i%26)))
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	tty.Close()
	slices.Sort(rtts)
	p50, p99 := rtts[len(rtts)/2], rtts[len(rtts)*99/100]
	b.ReportMetric(float64(p50.Microseconds())/1000, "echo-p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "echo-p99-ms")

	// Port-forward as a process of its own, to read its memory.
	local := jetlettest.FreePort(b)
	pf := exec.Command(jetlettest.Binary(b), "port-forward", "--nats-url", c.url, "default/bench", local+":8080")
	out, err := pf.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := pf.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pf.Process.Kill(); _ = pf.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.HasPrefix(line, "Forwarding from") {
		b.Fatalf("port-forward: %q, %v", line, err)
	}
	base := "http://127.0.0.1:" + local

	// 100 connections at once, 10 MiB each, through the forward and
	// straight over loopback; the CPU time the node and the CLI spent on
	// each MiB forwarded.
	nodeCPU, cliCPU := cpuTime(node.Pid()), cpuTime(pf.Process.Pid)
	forwarded := fetchAll(b, base+"/m10", 100)
	perMiB := func(d time.Duration) float64 { return float64(d.Milliseconds()) / (100 * 10) }
	b.ReportMetric(perMiB(cpuTime(node.Pid())-nodeCPU), "node-cpu-ms/MiB")
	b.ReportMetric(perMiB(cpuTime(pf.Process.Pid)-cliCPU), "cli-cpu-ms/MiB")
	payload := make([]byte, 10<<20)
	direct := directCopy(b, payload, 100)
	b.ReportMetric(forwarded/(1<<20), "forward-MiB/s")
	b.ReportMetric(direct/(1<<20), "direct-MiB/s")
	b.ReportMetric(forwarded/direct, "forward/direct")

	// 1 GiB to a reader that takes 64 KiB every millisecond (at most
	// 64 MiB/s), the memory of both processes sampled meanwhile.
	nodeBefore, cliBefore := rss(node.Pid()), rss(pf.Process.Pid)
	var nodePeak, cliPeak atomic.Int64
	stop := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				nodePeak.Store(max(nodePeak.Load(), rss(node.Pid())))
				cliPeak.Store(max(cliPeak.Load(), rss(pf.Process.Pid)))
			}
		}
	})
	resp, err := http.Get(base + "/g1")
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	var n int64
	for {
		m, err := io.ReadFull(resp.Body, buf)
		n += int64(m)
		if err != nil {
			break
		}
		time.Sleep(time.Millisecond) // the slow reader
	}
	resp.Body.Close()
	close(stop)
	sampling.Wait()
	if n != 1<<30 {
		b.Fatalf("read %d bytes of 1 GiB", n)
	}
	b.ReportMetric(float64(nodeBefore)/(1<<20), "node-rss-before-MiB")
	b.ReportMetric(float64(nodePeak.Load())/(1<<20), "node-rss-peak-MiB")
	b.ReportMetric(float64(cliBefore)/(1<<20), "cli-rss-before-MiB")
	b.ReportMetric(float64(cliPeak.Load())/(1<<20), "cli-rss-peak-MiB")
}

// fetchAll GETs url on n connections at once and returns the bytes per
// second of all.
func fetchAll(b *testing.B, url string, n int) float64 {
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Go(func() {
			resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			defer resp.Body.Close()
			m, err := io.Copy(io.Discard, resp.Body)
			if err != nil {
				b.Error(err)
			}
			total.Add(m)
		})
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds()
}

// directCopy sends payload on n loopback TCP connections at once and
// returns the bytes per second of all.
func directCopy(b *testing.B, payload []byte, n int) float64 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = conn.Write(payload)
			}()
		}
	}()
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Go(func() {
			conn, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				b.Error(err)
				return
			}
			defer conn.Close()
			m, _ := io.Copy(io.Discard, conn)
			total.Add(m)
		})
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds()
}

// cpuTime is the CPU time a process has used (utime and stime of
// /proc/PID/stat, in clock ticks of 10 ms).
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which may hold spaces.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// rss is a process's resident memory in bytes (VmRSS); 0 once it is gone.
func rss(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
