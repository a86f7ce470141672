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

// loadNetwork loads and checks the CNI network of Config.CNIConfDir: a dir
// with no usable config, or plugins missing, fail Start.
func (r *Runtime) loadNetwork(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("proc: pod networks through CNI need root (network namespaces are made and mounted)")
	}
	n, err := network.Load(ctx, network.Config{ConfDir: r.cfg.CNIConfDir, BinDirs: r.cfg.CNIBinDirs, CacheDir: r.cniCacheDir()})
	if err != nil {
		return fmt.Errorf("proc: %w", err)
	}
	for _, s := range n.Skipped() {
		r.log.Warn().Str("skipped", s).Msg("CNI config not usable")
	}
	r.log.Info().Str("network", n.Name()).Str("config", n.File()).Strs("bin_dirs", r.cfg.CNIBinDirs).
		Msg("pods get their own network namespace through CNI")
	r.net = n
	return nil
}

// wantsOwnNetwork: with CNI configured, every sandbox but those asking for
// the node's network (hostNetwork) gets a namespace of its own.
func (r *Runtime) wantsOwnNetwork(cfg *runtimeapi.PodSandboxConfig) bool {
	return r.net != nil && cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE
}

// setUpNetwork makes s's network namespace with create (network.Create, or
// Adopt for one made in the pod's user namespace) and attaches it to the
// CNI network. The record names the namespace before it exists, so that a
// crash half-way leaves a NOTREADY sandbox whose stop tears down what was
// made. On failure what was made is undone and the plugin's error returned.
func (r *Runtime) setUpNetwork(ctx context.Context, s *sandbox, create func(dir, id string) (string, error)) error {
	s.netns = filepath.Join(r.netnsDir(), s.id)
	if err := r.saveSandbox(s, false); err != nil {
		return fmt.Errorf("record sandbox: %w", err)
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
	if r.net == nil {
		// Started without --cni-conf-dir: nothing can run the DEL.
		r.log.Warn().Str("sandbox", s.id).Str("netns", netns).
			Msg("sandbox has a CNI network but no CNI config is loaded: removing its namespace without CNI DEL; the network may keep its address")
	} else if err := r.net.Del(ctx, podOf(s)); err != nil {
		return err
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
	pod := network.Pod{SandboxID: s.id, Namespace: md.GetNamespace(), Name: md.GetName(), UID: md.GetUid(), NetNS: s.netns}
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
