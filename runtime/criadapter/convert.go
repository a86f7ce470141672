package criadapter

import (
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile"
)

func toCRISandboxState(s reconcile.SandboxState) runtimeapi.PodSandboxState {
	if s == reconcile.SandboxReady {
		return runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return runtimeapi.PodSandboxState_SANDBOX_NOTREADY
}

func fromCRISandboxState(s runtimeapi.PodSandboxState) reconcile.SandboxState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return reconcile.SandboxReady
	}
	return reconcile.SandboxNotReady
}

func toCRIContainerState(s reconcile.ContainerState) runtimeapi.ContainerState {
	switch s {
	case reconcile.ContainerCreated:
		return runtimeapi.ContainerState_CONTAINER_CREATED
	case reconcile.ContainerRunning:
		return runtimeapi.ContainerState_CONTAINER_RUNNING
	case reconcile.ContainerExited:
		return runtimeapi.ContainerState_CONTAINER_EXITED
	}
	return runtimeapi.ContainerState_CONTAINER_UNKNOWN
}

func fromCRIContainerState(s runtimeapi.ContainerState) reconcile.ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return reconcile.ContainerCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return reconcile.ContainerRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return reconcile.ContainerExited
	}
	return reconcile.ContainerUnknown
}

func toCRINamespaceMode(m reconcile.NamespaceMode) runtimeapi.NamespaceMode {
	switch m {
	case reconcile.NamespaceContainer:
		return runtimeapi.NamespaceMode_CONTAINER
	case reconcile.NamespaceNode:
		return runtimeapi.NamespaceMode_NODE
	case reconcile.NamespaceTarget:
		return runtimeapi.NamespaceMode_TARGET
	}
	return runtimeapi.NamespaceMode_POD
}

func fromCRINamespaceMode(m runtimeapi.NamespaceMode) reconcile.NamespaceMode {
	switch m {
	case runtimeapi.NamespaceMode_CONTAINER:
		return reconcile.NamespaceContainer
	case runtimeapi.NamespaceMode_NODE:
		return reconcile.NamespaceNode
	case runtimeapi.NamespaceMode_TARGET:
		return reconcile.NamespaceTarget
	}
	return reconcile.NamespacePod
}

func toCRINamespaceOptions(o reconcile.NamespaceOptions) *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{
		Network: toCRINamespaceMode(o.Network),
		Pid:     toCRINamespaceMode(o.PID),
		Ipc:     toCRINamespaceMode(o.IPC),
	}
}

func fromCRINamespaceOptions(o *runtimeapi.NamespaceOption) reconcile.NamespaceOptions {
	return reconcile.NamespaceOptions{
		Network: fromCRINamespaceMode(o.GetNetwork()),
		PID:     fromCRINamespaceMode(o.GetPid()),
		IPC:     fromCRINamespaceMode(o.GetIpc()),
	}
}

func toCRIProtocol(p reconcile.Protocol) runtimeapi.Protocol {
	switch p {
	case reconcile.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case reconcile.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

func toCRIPropagation(p reconcile.MountPropagation) runtimeapi.MountPropagation {
	switch p {
	case reconcile.PropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case reconcile.PropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}

func fromCRIPropagation(p runtimeapi.MountPropagation) reconcile.MountPropagation {
	switch p {
	case runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER:
		return reconcile.PropagationHostToContainer
	case runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL:
		return reconcile.PropagationBidirectional
	}
	return reconcile.PropagationPrivate
}

func fromCRIMount(m *runtimeapi.Mount) reconcile.Mount {
	return reconcile.Mount{
		ContainerPath:  m.GetContainerPath(),
		HostPath:       m.GetHostPath(),
		Readonly:       m.GetReadonly(),
		SelinuxRelabel: m.GetSelinuxRelabel(),
		Propagation:    fromCRIPropagation(m.GetPropagation()),
	}
}

func fromCRISandboxMetadata(m *runtimeapi.PodSandboxMetadata) reconcile.SandboxMetadata {
	return reconcile.SandboxMetadata{Name: m.GetName(), UID: m.GetUid(), Namespace: m.GetNamespace(), Attempt: m.GetAttempt()}
}

func fromCRIContainerMetadata(m *runtimeapi.ContainerMetadata) reconcile.ContainerMetadata {
	return reconcile.ContainerMetadata{Name: m.GetName(), Attempt: m.GetAttempt()}
}

func optionalInt64(p *int64) *runtimeapi.Int64Value {
	if p == nil {
		return nil
	}
	return &runtimeapi.Int64Value{Value: *p}
}

func toCRISandboxConfig(c *reconcile.SandboxConfig) *runtimeapi.PodSandboxConfig {
	if c == nil {
		return nil
	}
	out := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: c.Metadata.Name, Uid: c.Metadata.UID, Namespace: c.Metadata.Namespace, Attempt: c.Metadata.Attempt,
		},
		Hostname:     c.Hostname,
		LogDirectory: c.LogDirectory,
		Labels:       c.Labels,
		Annotations:  c.Annotations,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: c.CgroupParent,
			Sysctls:      c.Sysctls,
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions:   toCRINamespaceOptions(c.SecurityContext.NamespaceOptions),
				RunAsUser:          optionalInt64(c.SecurityContext.RunAsUser),
				RunAsGroup:         optionalInt64(c.SecurityContext.RunAsGroup),
				SupplementalGroups: c.SecurityContext.SupplementalGroups,
				ReadonlyRootfs:     c.SecurityContext.ReadonlyRootfs,
				Privileged:         c.SecurityContext.Privileged,
			},
		},
	}
	for _, p := range c.PortMappings {
		out.PortMappings = append(out.PortMappings, &runtimeapi.PortMapping{
			Protocol: toCRIProtocol(p.Protocol), ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP,
		})
	}
	return out
}

func toCRIImageSpec(s reconcile.ImageSpec) *runtimeapi.ImageSpec {
	return &runtimeapi.ImageSpec{Image: s.Image, Annotations: s.Annotations}
}

func toCRIContainerConfig(c *reconcile.ContainerConfig) *runtimeapi.ContainerConfig {
	if c == nil {
		return nil
	}
	out := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Metadata.Name, Attempt: c.Metadata.Attempt},
		Image:       toCRIImageSpec(c.Image),
		Command:     c.Command,
		Args:        c.Args,
		WorkingDir:  c.WorkingDir,
		Labels:      c.Labels,
		Annotations: c.Annotations,
		LogPath:     c.LogPath,
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.Tty,
		Linux:       &runtimeapi.LinuxContainerConfig{},
	}
	for _, e := range c.Envs {
		out.Envs = append(out.Envs, &runtimeapi.KeyValue{Key: e.Key, Value: []byte(e.Value)})
	}
	for _, m := range c.Mounts {
		out.Mounts = append(out.Mounts, &runtimeapi.Mount{
			ContainerPath: m.ContainerPath, HostPath: m.HostPath, Readonly: m.Readonly,
			SelinuxRelabel: m.SelinuxRelabel, Propagation: toCRIPropagation(m.Propagation),
		})
	}
	if r := c.Resources; r != nil {
		out.Linux.Resources = &runtimeapi.LinuxContainerResources{
			CpuPeriod: r.CPUPeriod, CpuQuota: r.CPUQuota, CpuShares: r.CPUShares,
			MemoryLimitInBytes: r.MemoryLimitInBytes, OomScoreAdj: r.OomScoreAdj,
			CpusetCpus: r.CpusetCpus, CpusetMems: r.CpusetMems,
		}
	}
	if sc := c.SecurityContext; sc != nil {
		csc := &runtimeapi.LinuxContainerSecurityContext{
			Privileged:         sc.Privileged,
			NamespaceOptions:   toCRINamespaceOptions(sc.NamespaceOptions),
			RunAsUser:          optionalInt64(sc.RunAsUser),
			RunAsGroup:         optionalInt64(sc.RunAsGroup),
			RunAsUsername:      sc.RunAsUsername,
			ReadonlyRootfs:     sc.ReadonlyRootfs,
			SupplementalGroups: sc.SupplementalGroups,
			NoNewPrivs:         sc.NoNewPrivs,
		}
		if sc.Capabilities != nil {
			csc.Capabilities = &runtimeapi.Capability{
				AddCapabilities: sc.Capabilities.AddCapabilities, DropCapabilities: sc.Capabilities.DropCapabilities,
			}
		}
		out.Linux.SecurityContext = csc
	}
	return out
}
