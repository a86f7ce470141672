package reconcile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/schemas"
)

// containerLogPath is <container>/<restartCount>.log, relative to the
// sandbox's log directory.
func containerLogPath(name string, restartCount int) string {
	return filepath.Join(name, strconv.Itoa(restartCount)+".log")
}

// generateContainerConfig builds the CRI config of one container instance, as
// kubelet's generateContainerConfig. It creates the container's log directory
// and the directories of its emptyDir and *OrCreate hostPath volumes, and
// writes the pod's hosts file.
func (m *Kuberuntime) generateContainerConfig(ctx context.Context, pod *corev1.Pod, c *corev1.Container, restartCount int, imageRef string, net podNetwork, isInit bool) (*runtimeapi.ContainerConfig, error) {
	if err := m.verifyRunAsNonRoot(ctx, pod, c, imageRef); err != nil {
		return nil, err
	}
	envs, err := m.makeEnvironmentVariables(ctx, pod, c, net)
	if err != nil {
		return nil, err
	}
	mapping := envMapping(envs)
	cmd, args := expandCommandAndArgs(c, mapping)
	mounts, err := m.makeMounts(pod, c, mapping)
	if err != nil {
		return nil, err
	}
	hosts, err := m.etcHostsMount(pod, c, net)
	if err != nil {
		return nil, err
	}
	if hosts != nil {
		mounts = append(mounts, hosts)
	}
	if c.TerminationMessagePath != "" {
		tm, err := m.terminationMessageMount(pod, c, restartCount)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, tm)
	}
	sc, err := m.containerSecurityContext(pod, c)
	if err != nil {
		return nil, err
	}
	logDir := filepath.Join(podLogsDir(m.cfg.LogDir, pod.Namespace, pod.Name, string(pod.UID)), c.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	signal, err := stopSignal(c)
	if err != nil {
		return nil, err
	}
	resources := m.linuxResources(c)
	m.cfg.Swap.configureSwap(resources, pod, c)
	image := imageRef
	if image == "" {
		image = c.Image
	}
	return &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: image},
		Command:     cmd,
		Args:        args,
		WorkingDir:  c.WorkingDir,
		Envs:        envs,
		Mounts:      mounts,
		Labels:      newContainerLabels(pod, c),
		Annotations: newContainerAnnotations(pod, c, restartCount, isInit),
		LogPath:     containerLogPath(c.Name, restartCount),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux:       &runtimeapi.LinuxContainerConfig{Resources: resources, SecurityContext: sc},
		StopSignal:  signal,
	}, nil
}

// containerSecurityContext merges the pod's and the container's security
// contexts (the container's wins), as kubelet's determineEffectiveSecurityContext.
func (m *Kuberuntime) containerSecurityContext(pod *corev1.Pod, c *corev1.Container) (*runtimeapi.LinuxContainerSecurityContext, error) {
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	ns, err := m.podUserNamespace(pod)
	if err != nil {
		return nil, err
	}
	out := &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions:         namespaceOptions(pod, ns),
		MaskedPaths:              maskedPaths(sc.ProcMount),
		ReadonlyPaths:            readonlyPaths(sc.ProcMount),
		RunAsUser:                optionalInt64(psc.RunAsUser),
		RunAsGroup:               optionalInt64(psc.RunAsGroup),
		SupplementalGroups:       supplementalGroups(psc),
		SupplementalGroupsPolicy: supplementalGroupsPolicy(psc),
		Seccomp:                  m.seccompProfile(psc.SeccompProfile, sc.SeccompProfile),
		Apparmor:                 appArmorProfile(psc.AppArmorProfile, sc.AppArmorProfile),
		SelinuxOptions:           seLinuxOptions(psc.SELinuxOptions, sc.SELinuxOptions),
	}
	if sc.RunAsUser != nil {
		out.RunAsUser = optionalInt64(sc.RunAsUser)
	}
	if sc.RunAsGroup != nil {
		out.RunAsGroup = optionalInt64(sc.RunAsGroup)
	}
	if sc.Privileged != nil && *sc.Privileged {
		if !m.cfg.AllowPrivileged {
			return nil, errors.New("privileged containers are not allowed on this node")
		}
		out.Privileged = true
	}
	if sc.ReadOnlyRootFilesystem != nil {
		out.ReadonlyRootfs = *sc.ReadOnlyRootFilesystem
	}
	if sc.AllowPrivilegeEscalation != nil {
		out.NoNewPrivs = !*sc.AllowPrivilegeEscalation
	}
	if caps := sc.Capabilities; caps != nil {
		out.Capabilities = &runtimeapi.Capability{}
		for _, a := range caps.Add {
			out.Capabilities.AddCapabilities = append(out.Capabilities.AddCapabilities, string(a))
		}
		for _, d := range caps.Drop {
			out.Capabilities.DropCapabilities = append(out.Capabilities.DropCapabilities, string(d))
		}
	}
	return out, nil
}

// emptyDirPath is <DataDir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>.
func (m *Kuberuntime) emptyDirPath(uid, volume string) string {
	return filepath.Join(m.podDataDir(uid), "volumes", emptyDirPluginDir, volume)
}

// makeMounts turns volume mounts into CRI mounts: hostPath as is (created
// when its type says so), emptyDir under the data dir (a tmpfs for medium
// Memory), the volumes of API data where mountVolumes wrote them. Other
// volume types are an error. A subPath (or subPathExpr, expanded with
// mapping, the container's environment) is resolved beneath its volume and
// bind-mounted by bindSubPath, whose bind is what the CRI mounts: a subPath
// into a volume of API data keeps the file of the generation current at the
// container's creation, as kubelet's.
func (m *Kuberuntime) makeMounts(pod *corev1.Pod, c *corev1.Container, mapping func(string) (string, bool)) ([]*runtimeapi.Mount, error) {
	if len(c.VolumeDevices) > 0 {
		return nil, fmt.Errorf("container %q: volumeDevices are not supported", c.Name)
	}
	var mounts []*runtimeapi.Mount
	for i, vm := range c.VolumeMounts {
		var vol *corev1.Volume
		for j := range pod.Spec.Volumes {
			if pod.Spec.Volumes[j].Name == vm.Name {
				vol = &pod.Spec.Volumes[j]
				break
			}
		}
		if vol == nil {
			return nil, fmt.Errorf("container %q: volume mount %q names no volume of the pod", c.Name, vm.Name)
		}
		var hostPath string
		readOnly := vm.ReadOnly
		switch {
		case vol.HostPath != nil:
			hostPath = vol.HostPath.Path
			if err := prepareHostPath(vol.HostPath); err != nil {
				return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
			}
		case vol.EmptyDir != nil:
			hostPath = m.emptyDirPath(string(pod.UID), vol.Name)
			if err := m.setUpEmptyDir(emptyDirPluginDir, hostPath, pod, vol.EmptyDir); err != nil {
				return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
			}
		case apiDataPluginDir(vol) != "":
			// Written by the sync's mountVolumes; read-only, as kubelet
			// mounts API data (mustMountRO): the writer's generations are
			// not the container's to change.
			hostPath = m.apiDataVolumePath(string(pod.UID), apiDataPluginDir(vol), vol.Name)
			readOnly = true
		default:
			return nil, fmt.Errorf("volume %q: only hostPath, emptyDir, configMap, secret, downwardAPI and projected volumes are supported", vol.Name)
		}
		subPath := vm.SubPath
		if vm.SubPathExpr != "" {
			subPath = expand(vm.SubPathExpr, mapping)
		}
		if subPath != "" {
			if err := schemas.CheckRelativePath(subPath); err != nil {
				return nil, fmt.Errorf("volume mount %q of container %q: subPath %q %w", vm.Name, c.Name, subPath, err)
			}
			bind, err := m.bindSubPath(subPathMount{
				uid: string(pod.UID), volume: vol.Name, container: c.Name, index: i,
				volumePath: hostPath, subPath: subPath,
				create: vol.EmptyDir != nil || vol.HostPath != nil,
			})
			if err != nil {
				return nil, fmt.Errorf("volume mount %q of container %q: %w", vm.Name, c.Name, err)
			}
			hostPath = bind
		}
		mounts = append(mounts, &runtimeapi.Mount{
			ContainerPath: vm.MountPath,
			HostPath:      hostPath,
			Readonly:      readOnly,
			// IfPossible is a plain read-only mount: jetlet does not ask the
			// runtime whether it can make one recursive.
			RecursiveReadOnly: vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == corev1.RecursiveReadOnlyEnabled,
			Propagation:       toPropagation(vm.MountPropagation),
		})
	}
	return mounts, nil
}

func toPropagation(p *corev1.MountPropagationMode) runtimeapi.MountPropagation {
	if p == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	}
	switch *p {
	case corev1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case corev1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}

// prepareHostPath creates DirectoryOrCreate and FileOrCreate paths and checks
// Directory and File ones, as kubelet's hostPath plugin.
func prepareHostPath(hp *corev1.HostPathVolumeSource) error {
	t := corev1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	switch t {
	case corev1.HostPathDirectoryOrCreate:
		return os.MkdirAll(hp.Path, 0o755)
	case corev1.HostPathFileOrCreate:
		if err := os.MkdirAll(filepath.Dir(hp.Path), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	case corev1.HostPathDirectory:
		fi, err := os.Stat(hp.Path)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("hostPath %q is not a directory", hp.Path)
		}
	case corev1.HostPathFile:
		fi, err := os.Stat(hp.Path)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("hostPath %q is not a file", hp.Path)
		}
	}
	return nil
}
