package network

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Local is the node-local bridge network (Bridge) made in process: what the
// bridge and host-local plugins do for a pod, through netlink, with no
// program executed. A pod start then spends no time starting plugins, nor in
// the bridge plugin's wait for the host's end to come up (50 ms and more
// when it is not up at once), half of a start before it.
//
// It is the same network as the plugins': the bridge, its gateway address,
// and host-local's address store (a file per address under IPAMDir, its lock
// file), so that pods attached either way share the subnet. A pod with a
// hostPort is attached through the plugins, portmap included (its NAT rules
// are its own); so is the DEL of a pod the plugins attached (libcni's cache
// has it), such as one from before an upgrade.
type Local struct {
	bridge Bridge
	// plugins is the same network through its CNI config and plugins.
	plugins *Network
	store   *addressStore
	gateway netip.Prefix // the bridge's address; its network is the subnet
}

// NewLocal is the in-process attachment to b, whose conflist plugins holds.
func NewLocal(b Bridge, plugins *Network) (*Local, error) {
	subnet, err := netip.ParsePrefix(b.Subnet)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR: %w", err)
	}
	store, err := openAddressStore(filepath.Join(b.IPAMDir, plugins.Name()), subnet)
	if err != nil {
		return nil, err
	}
	return &Local{bridge: b, plugins: plugins, store: store,
		gateway: netip.PrefixFrom(subnet.Addr().Next(), subnet.Bits())}, nil
}

// Name is the network's name.
func (l *Local) Name() string { return l.plugins.Name() }

// Add brings up the pod's lo and attaches the pod to the bridge: a veth pair
// whose pod end is eth0, an address from the store, a default route through
// the bridge. On failure what was made is undone; the caller's Del finds
// nothing left.
func (l *Local) Add(ctx context.Context, pod Pod) ([]string, error) {
	if len(pod.PortMappings) > 0 {
		return l.plugins.Add(ctx, pod)
	}
	br, err := l.ensureBridge()
	if err != nil {
		return nil, err
	}
	addr, err := l.store.reserve(pod.SandboxID, PodInterface)
	if err != nil {
		return nil, err
	}
	if err := l.attach(pod, br, addr); err != nil {
		if rerr := l.store.release(pod.SandboxID, PodInterface, []string{addr.String()}); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return nil, fmt.Errorf("network %q: %w", l.Name(), err)
	}
	return []string{addr.String()}, nil
}

// maxBridgePorts is how many ports a Linux bridge holds (the kernel's
// BR_MAX_PORTS, less port 0): the most pods one node-local network attaches.
const maxBridgePorts = 1023

// attach makes the veth pair, its host end a port of br (hairpin on, as the
// plugin's hairpinMode), and configures the pod's end in its namespace.
func (l *Local) attach(pod Pod, br netlink.Link, addr netip.Addr) error {
	ns, err := os.Open(pod.NetNS)
	if err != nil {
		return fmt.Errorf("open network namespace: %w", err)
	}
	defer ns.Close()
	host, err := vethName()
	if err != nil {
		return err
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = host
	attrs.MTU = br.Attrs().MTU
	attrs.MasterIndex = br.Attrs().Index
	attrs.Flags = net.FlagUp
	veth := &netlink.Veth{LinkAttrs: attrs, PeerName: PodInterface, PeerNamespace: netlink.NsFd(int(ns.Fd()))}
	if err := netlink.LinkAdd(veth); err != nil {
		if errors.Is(err, unix.EXFULL) {
			return fmt.Errorf("add veth %s: bridge %s has all its %d ports in use, a Linux bridge's most: %w", host, br.Attrs().Name, maxBridgePorts, err)
		}
		return fmt.Errorf("add veth %s: %w", host, err)
	}
	err = func() error {
		if err := netlink.LinkSetHairpin(veth, true); err != nil {
			return fmt.Errorf("hairpin mode on %s: %w", host, err)
		}
		return in([]Namespace{{Path: pod.NetNS, Type: unix.CLONE_NEWNET}}, func() error {
			if err := upLoopback(); err != nil {
				return err
			}
			return l.configurePodEnd(addr)
		})
	}()
	if err != nil {
		// The pod's end goes with it.
		if derr := netlink.LinkDel(veth); derr != nil && !isNotFound(derr) {
			err = errors.Join(err, fmt.Errorf("remove veth %s: %w", host, derr))
		}
	}
	return err
}

// configurePodEnd gives eth0, in the calling thread's namespace, its
// address and sets it up, with a default route through the gateway; the
// kernel announces the address when it comes up (arp_notify, as the bridge
// plugin sets), so that neighbours forget an earlier owner's MAC.
func (l *Local) configurePodEnd(addr netip.Addr) error {
	link, err := netlink.LinkByName(PodInterface)
	if err != nil {
		return fmt.Errorf("find %s in the pod: %w", PodInterface, err)
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+PodInterface+"/arp_notify", []byte("1"), 0); err != nil {
		return fmt.Errorf("arp_notify on %s: %w", PodInterface, err)
	}
	ipnet := &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(l.gateway.Bits(), 32)}
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipnet}); err != nil {
		return fmt.Errorf("address %s on %s: %w", ipnet, PodInterface, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up: %w", PodInterface, err)
	}
	route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: l.gateway.Addr().AsSlice()}
	if err := netlink.RouteAdd(route); err != nil {
		return fmt.Errorf("default route via %s: %w", l.gateway.Addr(), err)
	}
	return nil
}

// ensureBridge makes the bridge when it is missing (another may make it at
// the same time: the plugins for a hostPort pod), gives it the gateway
// address and sets it up, and turns IPv4 forwarding on, as the bridge
// plugin does at each ADD with isGateway.
func (l *Local) ensureBridge() (netlink.Link, error) {
	br, err := netlink.LinkByName(l.bridge.Name)
	if isNotFound(err) {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = l.bridge.Name
		if err := netlink.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("add bridge %s: %w", l.bridge.Name, err)
		}
		br, err = netlink.LinkByName(l.bridge.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("find bridge %s: %w", l.bridge.Name, err)
	}
	if _, ok := br.(*netlink.Bridge); !ok {
		return nil, fmt.Errorf("%s is a %s, not a bridge", l.bridge.Name, br.Type())
	}
	addrs, err := netlink.AddrList(br, netlink.FAMILY_V4)
	if err != nil {
		return nil, fmt.Errorf("addresses of bridge %s: %w", l.bridge.Name, err)
	}
	if !hasAddr(addrs, l.gateway.Addr()) {
		gw := &net.IPNet{IP: l.gateway.Addr().AsSlice(), Mask: net.CIDRMask(l.gateway.Bits(), 32)}
		if err := netlink.AddrAdd(br, &netlink.Addr{IPNet: gw}); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("gateway address %s on bridge %s: %w", gw, l.bridge.Name, err)
		}
	}
	if br.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(br); err != nil {
			return nil, fmt.Errorf("set bridge %s up: %w", l.bridge.Name, err)
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0); err != nil {
		return nil, fmt.Errorf("enable IPv4 forwarding: %w", err)
	}
	return br, nil
}

func hasAddr(addrs []netlink.Addr, a netip.Addr) bool {
	for _, x := range addrs {
		if ip, ok := netip.AddrFromSlice(x.IP); ok && ip.Unmap() == a {
			return true
		}
	}
	return false
}

// Del detaches the pod and releases its address; the plugins detach a pod
// they attached (libcni cached it) or one with a hostPort. It is idempotent,
// and a namespace already gone is no error (its veth pair went with it).
func (l *Local) Del(ctx context.Context, pod Pod) error {
	byPlugins, err := l.plugins.attached(pod.SandboxID)
	if err != nil {
		return err
	}
	if byPlugins || len(pod.PortMappings) > 0 {
		return l.plugins.Del(ctx, pod)
	}
	var errs []error
	if IsNamespace(pod.NetNS) {
		err := in([]Namespace{{Path: pod.NetNS, Type: unix.CLONE_NEWNET}}, func() error {
			link, err := netlink.LinkByName(PodInterface)
			if isNotFound(err) {
				return nil
			}
			if err == nil {
				err = netlink.LinkDel(link)
			}
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("remove the pod's %s: %w", PodInterface, err))
		}
	}
	if err := l.store.release(pod.SandboxID, PodInterface, pod.IPs); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("network %q: %w", l.Name(), errors.Join(errs...))
	}
	return nil
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}

// vethName is a host end's name as the plugins make it: veth and 8 random
// hex digits.
func vethName() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "veth" + hex.EncodeToString(b[:]), nil
}

// addressStore is host-local's store of one network (its disk backend): a
// file per reserved address, named by it and holding the owner's
// "<id>\r\n<ifname>", last_reserved_ip.0 naming the last address given,
// and the lock file the plugin flocks around each change. Addresses are
// given as host-local gives them from one range: after the last one given,
// wrapping around, skipping the network's first (the gateway) and last
// (broadcast) addresses, so an address freed is taken again as late as
// possible.
type addressStore struct {
	dir    string
	subnet netip.Prefix
	// mu serialises this process's changes; the flock on lock, the
	// plugins' with them.
	mu   sync.Mutex
	lock *os.File
}

const (
	lastReservedFile = "last_reserved_ip.0"
	ownerSeparator   = "\r\n"
)

func openAddressStore(dir string, subnet netip.Prefix) (*addressStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("address store: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDONLY|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("address store: %w", err)
	}
	return &addressStore{dir: dir, subnet: subnet.Masked(), lock: lock}, nil
}

// locked runs f holding the store's locks.
func (s *addressStore) locked(f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := unix.Flock(int(s.lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock the address store: %w", err)
	}
	defer unix.Flock(int(s.lock.Fd()), unix.LOCK_UN)
	return f()
}

// reserve gives id's interface the next free address.
func (s *addressStore) reserve(id, ifname string) (netip.Addr, error) {
	var got netip.Addr
	err := s.locked(func() error {
		first := s.subnet.Addr().Next().Next() // after the gateway
		start := first
		if data, err := os.ReadFile(filepath.Join(s.dir, lastReservedFile)); err == nil {
			if last, err := netip.ParseAddr(strings.TrimSpace(string(data))); err == nil && s.usable(last.Next()) {
				start = last.Next()
			}
		}
		for a := start; ; {
			f, err := os.OpenFile(filepath.Join(s.dir, a.String()), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			switch {
			case err == nil:
				_, err = f.WriteString(strings.TrimSpace(id) + ownerSeparator + ifname)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err == nil {
					err = os.WriteFile(filepath.Join(s.dir, lastReservedFile), []byte(a.String()), 0o600)
				}
				if err != nil {
					_ = os.Remove(filepath.Join(s.dir, a.String()))
					return fmt.Errorf("reserve %s: %w", a, err)
				}
				got = a
				return nil
			case !errors.Is(err, os.ErrExist):
				return fmt.Errorf("reserve %s: %w", a, err)
			}
			if a = a.Next(); !s.usable(a) {
				a = first
			}
			if a == start {
				return fmt.Errorf("no address left in %s", s.subnet)
			}
		}
	})
	return got, err
}

// usable reports whether a may be given to a pod: in the subnet, neither
// its network address, the gateway, nor its broadcast address.
func (s *addressStore) usable(a netip.Addr) bool {
	return s.subnet.Contains(a) && a != s.subnet.Addr() && a != s.subnet.Addr().Next() && s.subnet.Contains(a.Next())
}

// release frees the addresses id's interface holds: those of ips that
// name it as their owner, or, with no ips known (a crash before the
// sandbox's record had them), every one that does, found by reading the
// whole store as host-local does. A file naming id alone is an older
// host-local's, also id's.
func (s *addressStore) release(id, ifname string, ips []string) error {
	owner, legacy := strings.TrimSpace(id)+ownerSeparator+ifname, strings.TrimSpace(id)
	return s.locked(func() error {
		names := ips
		if len(names) == 0 {
			entries, err := os.ReadDir(s.dir)
			if err != nil {
				return fmt.Errorf("release the addresses of %s: %w", id, err)
			}
			for _, e := range entries {
				names = append(names, e.Name())
			}
		}
		var errs []error
		for _, name := range names {
			if _, err := netip.ParseAddr(name); err != nil {
				continue
			}
			p := filepath.Join(s.dir, name)
			data, err := os.ReadFile(p)
			if err != nil {
				continue // never reserved, or released already
			}
			if got := strings.TrimSpace(string(data)); got == owner || got == legacy {
				if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
		return errors.Join(errs...)
	})
}
