package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/network"
)

// podNetwork attaches pods to their network: network.Network (CNI),
// network.Local (the node-local bridge, in process) or network.LoopbackOnly.
type podNetwork interface {
	Add(ctx context.Context, pod network.Pod) ([]string, error)
	Del(ctx context.Context, pod network.Pod) error
}

// loadNetwork chooses the pods' network. With Config.CNIConfDir it is the
// first config there, checked: a dir with no usable config, or plugins
// missing, fail Start. Without, as root, it is the node-local bridge
// network, written under Dir; when its plugins (or iptables) are not
// usable, pods get a namespace with only lo, and netDown says why. Not
// root, no namespace can be made: pods share the host's network.
func (r *Runtime) loadNetwork(ctx context.Context) error {
	root := os.Geteuid() == 0
	if r.cfg.CNIConfDir != "" {
		if !root {
			return errors.New("proc: pod networks through CNI need root (network namespaces are made and mounted)")
		}
		n, err := r.loadCNI(ctx, r.cfg.CNIConfDir)
		if err != nil {
			return fmt.Errorf("proc: %w", err)
		}
		r.log.Info().Str("network", n.Name()).Str("config", n.File()).Strs("bin_dirs", r.cfg.CNIBinDirs).
			Msg("pods get their own network namespace through CNI")
		r.net = n
		return nil
	}
	if !root {
		r.netDown = "not root: pods share the host's network (no network namespace can be made)"
		r.log.Warn().Msg("pods share the host's network: " + r.netDown)
		return nil
	}
	b := network.Bridge{Name: r.cfg.PodBridge, Subnet: r.cfg.PodCIDR, ConfDir: r.cniConfDir(), IPAMDir: r.cniIPAMDir()}
	if err := b.Write(); err != nil {
		return fmt.Errorf("proc: write the pod network's CNI config: %w", err)
	}
	n, err := r.loadCNI(ctx, b.ConfDir)
	if err == nil {
		err = b.Firewall(ctx)
	}
	if err != nil {
		r.net = network.LoopbackOnly{}
		r.netDown = "the node-local pod network is not usable, pods get a network namespace with only lo (no address, no egress): " + err.Error()
		r.log.Warn().Err(err).Str("bin_dirs", strings.Join(r.cfg.CNIBinDirs, ":")).
			Msg("pods get a network namespace with only lo: the node-local pod network is not usable")
		return nil
	}
	local, err := network.NewLocal(b, n)
	if err != nil {
		return fmt.Errorf("proc: the node-local pod network: %w", err)
	}
	r.log.Info().Str("bridge", b.Name).Str("pod_cidr", b.Subnet).Msg("pods get their own network namespace on the node-local bridge")
	r.net = local
	return nil
}

// loadCNI loads and checks the first CNI config of dir.
func (r *Runtime) loadCNI(ctx context.Context, dir string) (*network.Network, error) {
	n, err := network.Load(ctx, network.Config{ConfDir: dir, BinDirs: r.cfg.CNIBinDirs, CacheDir: r.cniCacheDir()})
	if err != nil {
		return nil, err
	}
	for _, s := range n.Skipped() {
		r.log.Warn().Str("skipped", s).Msg("CNI config not usable")
	}
	return n, nil
}

// wantsOwnNetwork: unless pods share the host's network (not root), every
// sandbox but those asking for the node's network (hostNetwork) gets a
// namespace of its own.
func (r *Runtime) wantsOwnNetwork(cfg *runtimeapi.PodSandboxConfig) bool {
	return r.net != nil && cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE
}

// setUpNetwork makes s's network namespace with create (network.Create, or
// Adopt for one made in the pod's user namespace) and attaches it to the
// CNI network. The record names the namespace before it exists, so that a
// crash half-way leaves a NOTREADY sandbox whose stop tears down what was
// made. On failure what was made is undone and the plugin's error returned.
func (r *Runtime) setUpNetwork(ctx context.Context, s *sandbox, create func(dir, id string) (string, error)) error {
	if netns := r.netnsPath(s); s.netns != netns { // not in the sandbox's first record
		s.netns = netns
		if err := r.saveSandbox(s, false); err != nil {
			return fmt.Errorf("record sandbox: %w", err)
		}
	}
	err := func() error {
		if _, err := create(r.netnsDir(), s.id); err != nil {
			return err
		}
		ips, err := r.net.Add(ctx, podOf(s))
		s.ips = ips
		return err
	}()
	if err != nil {
		r.undoNetwork(ctx, s)
		return err
	}
	return nil
}

// netnsPath is where s's network namespace is mounted.
func (r *Runtime) netnsPath(s *sandbox) string { return filepath.Join(r.netnsDir(), s.id) }

// undoNetwork tears down the network of s, a sandbox that failed to start and
// was never published. Unlike a stop, which fails and is retried when the DEL
// fails, the namespace goes whatever the plugins say: nothing would retry.
func (r *Runtime) undoNetwork(ctx context.Context, s *sandbox) {
	if s.netns == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if err := r.net.Del(ctx, podOf(s)); err != nil {
		r.log.Error().Err(err).Str("sandbox", s.id).Msg("CNI DEL of a sandbox that failed to start; its address may stay reserved")
	}
	if err := network.Remove(s.netns); err != nil {
		r.log.Error().Err(err).Str("sandbox", s.id).Msg("remove the network namespace of a sandbox that failed to start")
	}
	s.netns = ""
}

// tearDownNetwork detaches s from the CNI network (CNI DEL) and removes its
// namespace; s keeps its IPs for its status. It is idempotent. The caller
// holds s.opMu or owns s alone.
func (r *Runtime) tearDownNetwork(ctx context.Context, s *sandbox) error {
	r.mu.RLock()
	netns := s.netns
	r.mu.RUnlock()
	if netns == "" {
		return nil
	}
	if _, loopbackOnly := r.net.(network.LoopbackOnly); (r.net == nil || loopbackOnly) && len(s.ips) > 0 {
		// Its network is not loaded now: nothing can run the DEL.
		r.log.Warn().Str("sandbox", s.id).Str("netns", netns).
			Msg("sandbox has a CNI network but no CNI config is loaded: removing its namespace without CNI DEL; the network may keep its address")
	} else if r.net != nil {
		if err := r.net.Del(ctx, podOf(s)); err != nil {
			return err
		}
	}
	if err := network.Remove(netns); err != nil {
		return err
	}
	r.mu.Lock()
	s.netns = ""
	r.mu.Unlock()
	return nil
}

func podOf(s *sandbox) network.Pod {
	md := s.config.GetMetadata()
	pod := network.Pod{SandboxID: s.id, Namespace: md.GetNamespace(), Name: md.GetName(), UID: md.GetUid(), NetNS: s.netns, IPs: s.ips}
	for _, pm := range s.config.GetPortMappings() {
		if pm.GetHostPort() <= 0 {
			continue
		}
		pod.PortMappings = append(pod.PortMappings, network.PortMapping{
			HostPort: pm.GetHostPort(), ContainerPort: pm.GetContainerPort(),
			Protocol: strings.ToLower(pm.GetProtocol().String()), HostIP: pm.GetHostIp(),
		})
	}
	return pod
}
