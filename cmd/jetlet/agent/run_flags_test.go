package agent

import (
	"testing"

	"github.com/spf13/pflag"
)

// Every flag of `jetlet run` has the default the contract (docs/contract.md
// section 7) and docs/running.md give it; a flag added without a row here
// fails too, so that its default is pinned when it is documented. The
// defaults are written as the docs write them and compared as the flag
// parses them ("2m" is 2m0s).
func TestRunFlagDefaultsAreTheDocumentedOnes(t *testing.T) {
	defaults := []struct{ flag, want, where string }{
		// docs/contract.md section 7.
		{"node", defaultNodeName(), "docs/contract.md section 7: the host name, as a DNS-1123 label"},
		{"data-dir", "./jetlet-data", "docs/contract.md section 7"},
		{"nats-url", "", "docs/contract.md section 7: none, the embedded server"},
		{"nats-listen", "127.0.0.1:4222", "docs/contract.md section 7"},
		{"runtime-endpoint", "", "docs/contract.md section 7: none, the embedded runtime"},
		{"http-listen", "127.0.0.1:9464", "docs/contract.md section 7"},
		{"allow-privileged", "false", "docs/contract.md section 7, node.md: --pod-security privileged"},
		{"nats-insecure", "false", "docs/contract.md section 7 (cluster issue)"},
		{"rename-node", "false", "docs/contract.md section 7 (event-ledger issue)"},
		{"cni-conf-dir", "", "docs/contract.md section 7 (embedded-runtime issue); docs/contract.md section 15: the node-local bridge network"},
		{"cni-bin-dir", "/usr/lib/cni,/opt/cni/bin", "running.md Pod sync"},
		{"pod-bridge", "jetlet0", "running.md Pod sync: the node-local pod network's bridge"},
		{"pod-cidr", "10.77.0.0/16", "running.md Pod sync: none of podman's, containerd's, Docker's, flannel's or k3s' defaults"},
		// docs/running.md, Pod sync: kubelet's settings.
		{"workers", "16", "running.md Pod sync"},
		{"intake-replicas", "1", "running.md Pod sync, scaling.md"},
		{"relist-period", "1s", "running.md Pod sync (kubelet's PLEG relist)"},
		{"evented-relist-period", "0", "running.md Pod sync: 0 is --relist-period"},
		{"resync-period", "1m", "running.md Pod sync"},
		{"runtime-request-timeout", "2m", "running.md Pod sync (kubelet's runtimeRequestTimeout)"},
		{"max-dead-containers-per-container", "1", "running.md Pod sync (kubelet's --maximum-dead-containers-per-container)"},
		{"container-log-max-size", "10Mi", "running.md Pod sync (kubelet's containerLogMaxSize)"},
		{"container-log-max-files", "5", "running.md Pod sync (kubelet's containerLogMaxFiles)"},
		{"container-log-monitor-interval", "10s", "running.md Pod sync (kubelet's containerLogMonitorInterval)"},
		{"runtime-shim", "", "running.md Pod sync: jetlet-shim beside jetlet"},
		{"pod-max-pids", "4096", "docs/contract.md section 15, running.md Pod sync (kubelet's --pod-max-pids, whose default is no limit)"},
		{"cgroup-driver", "cgroupfs", "running.md Pod sync, containerd.md (kubelet's --cgroup-driver; the runtime's RuntimeConfig wins)"},
		{"cgroups-per-qos", "true", "running.md Pod sync, containerd.md (kubelet's --cgroups-per-qos)"},
		{"cluster-dns", "", "running.md Pod sync (kubelet's --cluster-dns): none, ClusterFirst falls back to the node's resolver"},
		{"cluster-domain", "cluster.local", "running.md Pod sync (kubelet's --cluster-domain, as kubeadm sets it)"},
		{"resolv-conf", "/etc/resolv.conf", "running.md Pod sync (kubelet's --resolv-conf)"},
		{"image-credentials", "", "running.md Pod sync: <data-dir>/config.json when present"},
		{"image-pull-credentials-verification-policy", "NeverVerifyPreloadedImages", "running.md Pod sync (kubelet's imagePullCredentialsVerificationPolicy default)"},
		{"preloaded-images-verification-allowlist", "", "running.md Pod sync: none (kubelet's preloadedImagesVerificationAllowlist)"},
		{"image-registry-listen", "127.0.0.1:5050", "docs/contract.md section 13, running.md Images over the bus, containerd.md's hosts.toml"},
		{"image-store-dir", "", "running.md Pod sync, node.md: <data-dir>/runtime/images"},
		{"insecure-registry", "", "running.md Pod sync: none (loopback registries are plain HTTP anyway)"},
		{"host-programs", "false", "running.md Pod sync: off (images)"},
		{"memory-swap-behavior", "NoSwap", "docs/contract.md section 15, running.md Pod sync (kubelet's memorySwap.swapBehavior default)"},
		{"default-host-users", "true", "running.md Pod sync, security.md: the host's users, as kubelet's hostUsers default"},
		{"shutdown-timeout", "30s", "running.md Pod sync, Shutdown"},
		// docs/contract.md section 12, docs/node.md: kubelet's node settings.
		{"max-pods", "110", "docs/contract.md section 12, node.md (kubelet's --max-pods)"},
		{"kube-reserved", "", "docs/contract.md section 12, node.md: nothing reserved"},
		{"system-reserved", "", "docs/contract.md section 12, node.md: nothing reserved"},
		{"node-labels", "", "docs/contract.md section 12, node.md: hostname, os and arch only"},
		{"register-with-taints", "", "docs/contract.md section 12, node.md: no taints"},
		{"pod-security", "baseline", "docs/contract.md section 12, node.md"},
		{"eviction-hard", "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%,imagefs.inodesFree<5%", "docs/contract.md section 12, node.md (kubelet's defaults)"},
		{"eviction-soft", "", "docs/contract.md section 12, node.md: none"},
		{"eviction-soft-grace-period", "", "docs/contract.md section 12, node.md: none"},
		{"eviction-minimum-reclaim", "", "docs/contract.md section 12, node.md: none"},
		{"eviction-max-pod-grace-period", "0", "node.md (kubelet's --eviction-max-pod-grace-period)"},
		{"eviction-pressure-transition-period", "5m", "node.md (kubelet's --eviction-pressure-transition-period)"},
		{"image-gc-high-threshold", "85", "docs/contract.md section 12, node.md (kubelet's)"},
		{"image-gc-low-threshold", "80", "docs/contract.md section 12, node.md (kubelet's)"},
		{"image-minimum-gc-age", "2m", "docs/contract.md section 12, node.md (kubelet's)"},
		{"image-maximum-gc-age", "0", "docs/contract.md section 12, node.md: never"},
		{"shutdown-grace-period", "0", "node.md Graceful node shutdown (kubelet's shutdownGracePeriod): disabled"},
		{"shutdown-grace-period-critical-pods", "0", "node.md Graceful node shutdown (kubelet's shutdownGracePeriodCriticalPods)"},
		{"shutdown-grace-period-by-pod-priority", "", "node.md Graceful node shutdown (kubelet's shutdownGracePeriodByPodPriority): none"},
		// docs/running.md, Streams and buckets.
		{"subject-prefix", "jetlet", "running.md Streams and buckets"},
		{"replicas", "1", "running.md Streams and buckets"},
		{"intent-history", "16", "running.md Streams and buckets"},
		{"max-nodes", "10000", "running.md Streams and buckets"},
		{"intent-partitions", "1", "running.md Streams and buckets, scaling.md Sharded intents: JETLET_INTENTS alone"},
		{"max-age", "168h", "running.md Streams and buckets"},
		{"duplicate-window", "2m", "running.md Streams and buckets"},
		{"node-ttl", "1m", "running.md Streams and buckets"},
		{"terminated-status-ttl", "1h", "running.md Streams and buckets"},
		// docs/running.md, An existing NATS server, Logs, HTTP.
		{"nats-ping-interval", "1s", "running.md An existing NATS server"},
		{"nats-max-pings-out", "2", "running.md An existing NATS server"},
		{"nats-creds", "", "running.md An existing NATS server"},
		{"nats-nkey", "", "running.md An existing NATS server"},
		{"nats-user", "", "running.md An existing NATS server"},
		{"nats-password", "", "running.md An existing NATS server"},
		{"nats-token", "", "running.md An existing NATS server"},
		{"nats-tls-ca", "", "running.md An existing NATS server"},
		{"nats-tls-cert", "", "running.md An existing NATS server"},
		{"nats-tls-key", "", "running.md An existing NATS server"},
		{"nats-inbox-prefix", "", "running.md An existing NATS server: _INBOX"},
		{"log-level", "info", "running.md Logs"},
		{"profiling", "false", "running.md HTTP: /debug/pprof/ only with --profiling"},
	}
	cmd := NewRunCommand()
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	fs := cmd.Flags()
	pinned := map[string]bool{}
	for _, d := range defaults {
		pinned[d.flag] = true
		f := fs.Lookup(d.flag)
		if f == nil {
			t.Errorf("--%s: no such flag (%s)", d.flag, d.where)
			continue
		}
		got := f.Value.String()
		// The documented default, parsed as the flag parses it; a fresh
		// command, so that the one read above keeps its defaults.
		w := NewRunCommand().Flags().Lookup(d.flag).Value
		if err := w.Set(d.want); err != nil {
			t.Errorf("--%s: documented default %q does not parse: %v", d.flag, d.want, err)
			continue
		}
		if got != w.String() {
			t.Errorf("--%s defaults to %s, want %s (%s)", d.flag, got, w.String(), d.where)
		}
		if f.DefValue != got {
			t.Errorf("--%s: --help says the default is %q, the flag parses to %q", d.flag, f.DefValue, got)
		}
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if !pinned[f.Name] && f.Name != "help" {
			t.Errorf("--%s has no row here: document its default (docs/running.md) and pin it", f.Name)
		}
	})
}
