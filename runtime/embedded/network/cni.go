package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"golang.org/x/sys/unix"
)

const (
	// PodInterface is the pod's interface the network's plugins create.
	PodInterface = "eth0"
	loInterface  = "lo"
)

// Config says where the network config and the plugins are.
type Config struct {
	// ConfDir holds the network configs (.conflist, .conf, .json); the first
	// in lexical order is used, as kubelet and containerd do.
	ConfDir string
	// BinDirs are searched, in order, for the plugin executables.
	BinDirs []string
	// CacheDir is where libcni keeps each attachment's config and result,
	// which DEL reads.
	CacheDir string
}

// Network is the CNI network pods join, loaded and checked by Load.
type Network struct {
	cni  *libcni.CNIConfig
	list *libcni.NetworkConfigList
	// noPorts is list without its portmap plugin, for pods without a
	// hostPort (portmap has nothing to do for them; a process less at their
	// start and stop); list itself when it has none.
	noPorts *libcni.NetworkConfigList
	file    string
	skipped []string
}

// Pod identifies a pod sandbox to the plugins.
type Pod struct {
	SandboxID string
	Namespace string
	Name      string
	UID       string
	// NetNS is the path of the sandbox's network namespace.
	NetNS string
	// PortMappings go to plugins with the portMappings capability (portmap).
	PortMappings []PortMapping
	// IPs are the addresses Add gave the pod, when known: Local's Del frees
	// them without reading its whole address store.
	IPs []string
}

// PortMapping is a host port forwarded to the pod, in the form of the
// portMappings capability.
type PortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// Load reads the first usable network config in cfg.ConfDir and checks that
// its plugins are in cfg.BinDirs and speak its CNI version. A file that is not a usable config is skipped (Skipped says why),
// as kubelet does.
func Load(ctx context.Context, cfg Config) (*Network, error) {
	files, err := libcni.ConfFiles(cfg.ConfDir, []string{".conflist", ".conf", ".json"})
	if err != nil {
		return nil, fmt.Errorf("read CNI config dir: %w", err)
	}
	slices.Sort(files)
	n := &Network{cni: libcni.NewCNIConfigWithCacheDir(cfg.BinDirs, cfg.CacheDir, nil)}
	for _, f := range files {
		list, err := loadFile(f)
		if err != nil {
			n.skipped = append(n.skipped, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		n.list, n.file = list, f
		break
	}
	if n.list == nil {
		msg := fmt.Sprintf("no network config in CNI config dir %s", cfg.ConfDir)
		if len(n.skipped) > 0 {
			msg += " (skipped: " + strings.Join(n.skipped, "; ") + ")"
		}
		return nil, errors.New(msg)
	}
	if _, err := n.cni.ValidateNetworkList(ctx, n.list); err != nil {
		return nil, fmt.Errorf("CNI network %q (%s): plugins not usable from %s: %w", n.list.Name, n.file, strings.Join(cfg.BinDirs, ":"), err)
	}
	if n.noPorts, err = withoutPortmap(n.list); err != nil {
		return nil, err
	}
	return n, nil
}

// withoutPortmap is list without its portmap plugins; list when it has none.
func withoutPortmap(list *libcni.NetworkConfigList) (*libcni.NetworkConfigList, error) {
	var raw map[string]any
	if err := json.Unmarshal(list.Bytes, &raw); err != nil {
		return nil, err
	}
	plugins, _ := raw["plugins"].([]any)
	kept := slices.DeleteFunc(slices.Clone(plugins), func(p any) bool {
		m, _ := p.(map[string]any)
		return m["type"] == "portmap"
	})
	if len(kept) == len(plugins) || len(kept) == 0 {
		return list, nil
	}
	raw["plugins"] = kept
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	return libcni.ConfListFromBytes(data)
}

func loadFile(path string) (*libcni.NetworkConfigList, error) {
	if filepath.Ext(path) == ".conflist" {
		list, err := libcni.ConfListFromFile(path)
		if err != nil {
			return nil, err
		}
		if len(list.Plugins) == 0 {
			return nil, errors.New("no plugins")
		}
		return list, nil
	}
	conf, err := libcni.ConfFromFile(path)
	if err != nil {
		return nil, err
	}
	return libcni.ConfListFromConf(conf)
}

// Name is the network's name.
func (n *Network) Name() string { return n.list.Name }

// File is the config file the network came from.
func (n *Network) File() string { return n.file }

// Skipped lists the files before File that were not usable, with the reason.
func (n *Network) Skipped() []string { return n.skipped }

// Add brings up the pod's lo, attaches the pod to the network and returns
// its IPs, IPv4 first. On failure the caller undoes what was done with Del.
// lo is brought up in process, where kubelet and containerd run the
// loopback plugin (which does only that): a process less per pod start and
// stop. Sandboxes added before still have its attachment cached, which Del
// removes.
func (n *Network) Add(ctx context.Context, pod Pod) ([]string, error) {
	if err := in([]Namespace{{Path: pod.NetNS, Type: unix.CLONE_NEWNET}}, upLoopback); err != nil {
		return nil, err
	}
	list := n.list
	if len(pod.PortMappings) == 0 {
		list = n.noPorts
	}
	res, err := n.cni.AddNetworkList(ctx, list, n.runtimeConf(pod, PodInterface))
	if err != nil {
		return nil, fmt.Errorf("CNI network %q: %w", n.list.Name, err)
	}
	result, err := types100.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("CNI network %q: result: %w", n.list.Name, err)
	}
	ips := podIPs(result)
	if len(ips) == 0 {
		return nil, fmt.Errorf("CNI network %q gave the pod no IP", n.list.Name)
	}
	return ips, nil
}

// podIPs are the addresses of the result's interfaces inside the pod (or of
// no stated interface), IPv4 first.
func podIPs(r *types100.Result) []string {
	var v4, v6 []string
	for _, ip := range r.IPs {
		if i := ip.Interface; i != nil && (*i < 0 || *i >= len(r.Interfaces) || r.Interfaces[*i].Sandbox == "") {
			continue
		}
		if ip.Address.IP.To4() != nil {
			v4 = append(v4, ip.Address.IP.String())
		} else {
			v6 = append(v6, ip.Address.IP.String())
		}
	}
	return append(v4, v6...)
}

// Del detaches the pod: every attachment libcni cached for it is deleted with
// the config it was made with (so without portmap when it was added
// without), and the current network with the current config where none was
// cached (an ADD that failed half-way). It is
// idempotent, and a namespace that is already gone is no error: the plugins
// then release what they hold outside it (host-local's addresses).
func (n *Network) Del(ctx context.Context, pod Pod) error {
	if !IsNamespace(pod.NetNS) {
		pod.NetNS = ""
	}
	cached, err := n.cni.GetCachedAttachments(pod.SandboxID)
	if err != nil {
		return fmt.Errorf("read CNI cache: %w", err)
	}
	var errs []error
	done := map[string]bool{}
	for _, a := range cached {
		list, err := libcni.ConfListFromBytes(a.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("cached CNI config of network %q: %w", a.Network, err))
			continue
		}
		rt := &libcni.RuntimeConf{
			ContainerID: a.ContainerID, NetNS: pod.NetNS, IfName: a.IfName,
			Args: a.CniArgs, CapabilityArgs: a.CapabilityArgs,
		}
		if err := n.cni.DelNetworkList(ctx, list, rt); err != nil {
			errs = append(errs, fmt.Errorf("CNI network %q: %w", a.Network, err))
		}
		done[a.Network+"/"+a.IfName] = true
	}
	if !done[n.list.Name+"/"+PodInterface] {
		if err := n.cni.DelNetworkList(ctx, n.list, n.runtimeConf(pod, PodInterface)); err != nil {
			errs = append(errs, fmt.Errorf("CNI network %q: %w", n.list.Name, err))
		}
	}
	return errors.Join(errs...)
}

// attached reports whether libcni cached an attachment of the sandbox: the
// plugins attached it.
func (n *Network) attached(sandboxID string) (bool, error) {
	cached, err := n.cni.GetCachedAttachments(sandboxID)
	if err != nil {
		return false, fmt.Errorf("read CNI cache: %w", err)
	}
	return len(cached) > 0, nil
}

func (n *Network) runtimeConf(pod Pod, ifName string) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: pod.SandboxID,
		NetNS:       pod.NetNS,
		IfName:      ifName,
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", pod.Namespace},
			{"K8S_POD_NAME", pod.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", pod.SandboxID},
			{"K8S_POD_UID", pod.UID},
		},
	}
	if len(pod.PortMappings) > 0 {
		rt.CapabilityArgs = map[string]any{"portMappings": pod.PortMappings}
	}
	return rt
}
