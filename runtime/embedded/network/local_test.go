package network

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/poll"
)

func TestAddressStoreGivesAddressesAsHostLocal(t *testing.T) {
	dir := t.TempDir()
	s, err := openAddressStore(dir, netip.MustParsePrefix("10.1.2.0/29"))
	if err != nil {
		t.Fatal(err)
	}
	reserve := func(id string) string {
		t.Helper()
		a, err := s.reserve(id, "eth0")
		if err != nil {
			t.Fatal(err)
		}
		return a.String()
	}
	// .0 is the network, .1 the gateway, .7 the broadcast address.
	var got []string
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		got = append(got, reserve(id))
	}
	if want := []string{"10.1.2.2", "10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.2.6"}; !slices.Equal(got, want) {
		t.Fatalf("reserved %v, want %v", got, want)
	}
	if _, err := s.reserve("f", "eth0"); err == nil || !strings.Contains(err.Error(), "no address left in 10.1.2.0/29") {
		t.Fatalf("a full subnet: %v", err)
	}
	// The owner's record, in host-local's format.
	if data, err := os.ReadFile(filepath.Join(dir, "10.1.2.3")); err != nil || string(data) != "b\r\neth0" {
		t.Fatalf("10.1.2.3 holds %q, %v", data, err)
	}
	// A freed address is given again only after the others, from the last
	// one given; a release by known addresses and one by a walk of the store
	// (and a file of an older host-local, naming the id alone) free the same.
	if err := s.release("b", "eth0", []string{"10.1.2.3"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "10.1.2.5"), []byte("d"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.release("d", "eth0", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.release("nobody", "eth0", []string{"10.1.2.2", "not-an-ip", "10.1.2.9"}); err != nil {
		t.Fatal(err)
	}
	if a, b := reserve("g"), reserve("h"); a != "10.1.2.3" || b != "10.1.2.5" {
		t.Fatalf("after a wrap: %s and %s, want 10.1.2.3 and 10.1.2.5", a, b)
	}
	if _, err := os.Stat(filepath.Join(dir, "10.1.2.2")); err != nil {
		t.Fatalf("an address another owns was freed: %v", err)
	}
}

func TestLocalAttachesPodsBesideThePlugins(t *testing.T) {
	cnitest.Require(t)
	name, cidr := cnitest.Bridge(t)
	b := Bridge{Name: name, Subnet: cidr, ConfDir: t.TempDir(), IPAMDir: t.TempDir()}
	if err := b.Write(); err != nil {
		t.Fatal(err)
	}
	plugins := loadTestNetwork(t, b.ConfDir)
	l, err := NewLocal(b, plugins)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nsDir := filepath.Join(t.TempDir(), "netns")
	subnet := netip.MustParsePrefix(cidr)
	store := filepath.Join(b.IPAMDir, plugins.Name())
	add := func(id string, ports ...PortMapping) Pod {
		t.Helper()
		path, err := Create(nsDir, id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = Remove(path) })
		pod := Pod{SandboxID: id, Namespace: "default", Name: id, UID: "uid-" + id, NetNS: path, PortMappings: ports}
		if pod.IPs, err = l.Add(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if len(pod.IPs) != 1 || !subnet.Contains(netip.MustParseAddr(pod.IPs[0])) {
			t.Fatalf("%s got IPs %v, want one in %s", id, pod.IPs, cidr)
		}
		return pod
	}
	reserved := func(ip string) bool {
		_, err := os.Stat(filepath.Join(store, ip))
		return err == nil
	}

	a, c := add("in-process-a"), add("in-process-c")
	// A hostPort: the plugins attach it (portmap's rules bind no port),
	// from the same store.
	p := add("by-plugins", PortMapping{HostPort: 38080, ContainerPort: 8080, Protocol: "tcp"})
	if ips := []string{a.IPs[0], c.IPs[0], p.IPs[0]}; len(slices.Compact(slices.Sorted(slices.Values(ips)))) != 3 {
		t.Fatalf("the pods share addresses: %v", ips)
	}
	for _, pod := range []Pod{a, c} {
		if byPlugins, err := plugins.attached(pod.SandboxID); err != nil || byPlugins {
			t.Fatalf("%s attached by the plugins (%v)", pod.SandboxID, err)
		}
		if data, err := os.ReadFile(filepath.Join(store, pod.IPs[0])); err != nil || string(data) != pod.SandboxID+"\r\neth0" {
			t.Fatalf("the store's record of %s: %q, %v", pod.IPs[0], data, err)
		}
	}
	if byPlugins, err := plugins.attached(p.SandboxID); err != nil || !byPlugins {
		t.Fatalf("the hostPort pod not attached by the plugins (%v)", err)
	}
	// Every port of the bridge hairpins, as the plugin's hairpinMode.
	ports, err := os.ReadDir(filepath.Join("/sys/class/net", name, "brif"))
	if err != nil || len(ports) != 3 {
		t.Fatalf("bridge ports: %v, %v; want 3", ports, err)
	}
	for _, port := range ports {
		if mode, err := os.ReadFile(filepath.Join("/sys/class/net", name, "brif", port.Name(), "hairpin_mode")); err != nil || strings.TrimSpace(string(mode)) != "1" {
			t.Errorf("%s hairpin_mode %q, %v", port.Name(), mode, err)
		}
	}
	// Pods reach each other both ways across the two kinds of attachment.
	serve(t, a.NetNS)
	if got, want := dial(t, p.NetNS, a.IPs[0]+":8080"), "hello from "+a.IPs[0]+":8080\n"; got != want {
		t.Fatalf("the plugins' pod got %q from the in-process one, want %q", got, want)
	}
	serve(t, p.NetNS)
	if got, want := dial(t, c.NetNS, p.IPs[0]+":8080"), "hello from "+p.IPs[0]+":8080\n"; got != want {
		t.Fatalf("an in-process pod got %q from the plugins' one, want %q", got, want)
	}

	// DEL frees each address, again and again, and after the namespace is
	// gone (with no addresses known: the store is read whole).
	for _, pod := range []Pod{a, p, a, p} {
		if err := l.Del(ctx, pod); err != nil {
			t.Fatalf("DEL of %s: %v", pod.SandboxID, err)
		}
		if reserved(pod.IPs[0]) {
			t.Fatalf("%s still reserved after DEL", pod.IPs[0])
		}
	}
	if err := Remove(c.NetNS); err != nil {
		t.Fatal(err)
	}
	ip := c.IPs[0]
	c.IPs = nil
	if err := l.Del(ctx, c); err != nil || reserved(ip) {
		t.Fatalf("DEL after the namespace went: %v; %s reserved: %v", err, ip, reserved(ip))
	}
	// The kernel ends a namespace, and the veth pair in it, after its last
	// reference went, from a work queue.
	var left []os.DirEntry
	poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("no port of the bridge; %v left", left) }, func() bool {
		left, err = os.ReadDir(filepath.Join("/sys/class/net", name, "brif"))
		return err == nil && len(left) == 0
	})

	// An ADD that fails half-way leaves nothing: no address, no port.
	notNS := filepath.Join(t.TempDir(), "not-a-namespace")
	if err := os.WriteFile(notNS, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if ips, err := l.Add(ctx, Pod{SandboxID: "broken", NetNS: notNS}); err == nil {
		t.Fatalf("an ADD into a file that is no namespace gave %v", ips)
	}
	entries, err := os.ReadDir(store)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := netip.ParseAddr(e.Name()); err == nil {
			t.Errorf("%s left reserved", e.Name())
		}
	}
	if ports, err := os.ReadDir(filepath.Join("/sys/class/net", name, "brif")); err != nil || len(ports) != 0 {
		t.Fatalf("bridge ports left by the failed ADD: %v, %v", ports, err)
	}
}
