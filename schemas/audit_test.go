package schemas

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Honoured or rejected, never silently dropped (docs/contract.md section 3): every
// field of a pod's metadata and spec that DecodeIntent accepts is listed below with what
// answers for it. TestEveryAcceptedFieldIsHonouredOrRejected walks the Go
// types of k8s.io/api, so a field that a new k8s.io/api brings fails the test
// until someone classifies it here.
//
// PENDING: the entries marked pending are honoured but no test drives them
// yet: postStart's httpGet and sleep (the hooks work runs them through the
// code preStop's tests drive); replace `pending` by `tests` once a test does.
// The test logs every pending entry.
//
// Paths are JSON names under the pod ("spec.containers.env.valueFrom"), list
// indexes dropped; spec.initContainers is classified by the spec.containers
// entries (the validator checks both alike).
type fieldAnswer struct {
	path string
	// subtree: the entry answers for every field under path too. Only for
	// answers that hold for any field there: rejected, pending, nothing.
	subtree bool
	// tests are behaviour tests, "<package dir>.<TestName>", checked to exist.
	tests []string
	// rejects edits the minimal intent (decode_test.go's intentJSON) so that
	// the field holds a value the node cannot honour; DecodeIntent must
	// answer with a problem naming the field. Alone, it means every value but
	// the default (which is what the runtime does anyway) is rejected.
	rejects func(m map[string]any)
	// nothing says why the node has nothing to do for the field: it is the
	// scheduler's or the API server's, and kubelet acts on it no more than
	// jetlet does.
	nothing string
	// pending names the work that honours the field untested ("hooks").
	pending string
	// kind is the rejection's kind: ErrUnsupported unless set.
	kind ErrorKind
	// note qualifies the answer in the docs' table.
	note string
}

// Behaviour tests, by package.
const (
	tContainerConfig   = "reconcile.TestContainerConfig"
	tSpecFields        = "reconcile.TestContainerConfigHonoursSpecFields"
	tSandboxFields     = "reconcile.TestSandboxConfigHonoursSpecFields"
	tRunAsNonRoot      = "reconcile.TestRunAsNonRoot"
	tEmptyDirMode      = "reconcile.TestEmptyDirModeAndFSGroup"
	tMemoryEmptyDir    = "reconcile.TestMemoryEmptyDirIsATmpfsUnmountedByGC"
	tSubPathBound      = "reconcile.TestSubPathIsBoundFromTheObjectOpened"
	tE2ESubPath        = "test/e2e.TestASubPathCannotLeaveItsVolume"
	tResourceFieldRef  = "reconcile.TestResourceFieldRefEnv"
	tSyncPodStarts     = "reconcile.TestSyncPodStartsNewPod"
	tSpecChange        = "reconcile.TestSpecChangeRestartsOnlyThatContainer"
	tComputePodActions = "reconcile.TestComputePodActions"
	tOnFailure         = "reconcile.TestOnFailureExitZeroIsNotRestarted"
	tInitInOrder       = "reconcile.TestInitContainersRunInOrder"
	tKillGrace         = "reconcile.TestKillPodEscalatesAfterGracePeriod"
	tImagePullBackOff  = "reconcile.TestImagePullBackOff"
	tPullPolicy        = "reconcile.TestPullPolicyDefault"
	tPrivileged        = "schemas.TestDecodeIntentPrivileged"
	tE2EFields         = "test/e2e.TestResourceFieldRefAndMemoryEmptyDir"
	tCtrdFields        = "test/e2e/containerd/pods.TestResourceFieldRefAndMemoryEmptyDirOnContainerd"
	tCtrdStarts        = "test/e2e/containerd/pods.TestPodStartsAndRuns"
	tPodDNS            = "reconcile.TestPodDNSConfig"
	tEtcHosts          = "reconcile.TestEtcHostsMount"
	tE2EHostsDNS       = "test/e2e.TestThePodsHostsFileAndDNS"
	tCtrdHostsDNS      = "test/e2e/containerd/pods.TestHostAliasesAndDNSConfigOnContainerd"
	tUserns            = "reconcile.TestPodsWithoutHostUsersGetTheirOwnUserNamespaces"
	tUsernsRuntime     = "runtime/embedded.TestAPodInAUserNamespace"
	tUsernsAllocator   = "reconcile/userns.TestAllocator"
	tUnmaskedProc      = "runtime/embedded.TestUnmaskedProcInAUserNamespace"
	tCtrdGrace         = "test/e2e/containerd/pods.TestDeleteKillsProcessIgnoringSIGTERMAfterGrace"

	// Admission's (the node issue's).
	tPodSecurity    = "reconcile/admission.TestPodSecurity"
	tE2EPodSecurity = "test/e2e.TestPodSecurityAtTheNode"
	tNodeAffinity   = "reconcile/admission.TestNodeAffinity"
	tTaints         = "reconcile/admission.TestTaints"
	tHostPorts      = "reconcile/admission.TestHostPorts"
	tResources      = "reconcile/admission.TestResources"
	tNodePressure   = "reconcile/admission.TestNodePressure"
	tE2EAdmission   = "test/e2e.TestAdmissionRefusesWhatDoesNotFit"
	tAdmissionRace  = "reconcile/podworkers.TestAdmissionRaceForTheLastMemoryHasOneWinner"

	// The resize work's.
	tResizePlan     = "reconcile.TestComputePodActionsForPodResize"
	tResizeInPlace  = "reconcile.TestResizeInPlace"
	tResizePolicy   = "reconcile.TestResizeRestartContainerPolicy"
	tResizeAdmitted = "reconcile/podworkers.TestResizeIsAdmittedDeferredOrInfeasible"
	tE2EResize      = "test/e2e.TestAResizeChangesTheCgroupWithoutARestart"

	// Pod-level resources'.
	tPodResources         = "schemas.TestPodLevelResources"
	tPodResourcesDefaults = "schemas.TestPodLevelResourcesDefaults"
	tPodResourcesCgroup   = "reconcile.TestPodSandboxResources"
	tPodResourcesResize   = "reconcile.TestPodLevelResourcesResizeInPlace"
	tQOS                  = "reconcile/admission.TestPodQOS"
	tE2EPodResources      = "test/e2e.TestPodLevelResourcesLimitThePodCgroup"

	// The config issue's.
	tE2EConfig = "test/e2e.TestConfigMapsAndSecretsReachThePod"

	// The hooks work's.
	tPostStartFails        = "reconcile.TestPostStartHookFailureKillsTheContainer"
	tE2EPostStartFails     = "test/e2e.TestPostStartFailureKillsTheContainer"
	tPreStop               = "reconcile.TestPreStopHookRunsBeforeTheStop"
	tE2EPreStop            = "test/e2e.TestPreStopRunsBeforeTheSIGTERMHandler"
	tCtrdPreStop           = "test/e2e/containerd/pods.TestPreStopRunsBeforeSIGTERMOnDelete"
	tPreStopSleep          = "reconcile.TestPreStopSleepIsBoundedByTheGracePeriod"
	tPostStartSleep        = "reconcile.TestPostStartSleepHook"
	tPostStartHTTPGet      = "reconcile.TestPostStartHTTPGetHook"
	tHTTPGetHook           = "reconcile.TestHTTPGetHookGoesToThePodIPAndNamedPort"
	tResolveHTTPGet        = "reconcile.TestResolveHTTPGet"
	tHTTPGetHandler        = "runtime/probe.TestHTTPGet"
	tStopSignalConfig      = "reconcile.TestStopSignalInContainerConfig"
	tE2EStopSignal         = "test/e2e.TestStopSignalStopsTheContainer"
	tProcStopSignal        = "runtime/embedded.TestStopSignalFromConfig"
	tTerminationMessage    = "reconcile.TestTerminationMessageFileAndLastState"
	tE2ETerminationMessage = "test/e2e.TestTerminationMessageAndLastState"
	tTerminationFallback   = "reconcile.TestTerminationMessageFallsBackToTheLog"
	tKillPastDeadline      = "reconcile.TestKillPastDeadline"
	tWorkersDeadline       = "reconcile/podworkers.TestAPodPastItsActiveDeadlineIsKilledAtItAndStaysFailed"
	tE2EDeadline           = "test/e2e.TestActiveDeadlineEndsASleepingPod"
	tSidecars              = "reconcile.TestSidecarsStartFirstAndStopLast"
	tE2ESidecar            = "test/e2e.TestSidecarRunsBesideTheAppAndStopsAfterIt"
	tCtrdSidecar           = "test/e2e/containerd/pods.TestSidecarStopsAfterTheAppContainer"

	// Container restart rules (KEP-5307).
	tRestartRules   = "reconcile.TestComputePodActionsWithContainerRestartRules"
	tE2ERestartRule = "reconcile/podworkers.TestARestartRuleRestartsOnItsExitCodeOnly"
	tPolicyNever    = "reconcile/podworkers.TestAContainerWhosePolicyIsNeverStaysExitedWhileThePodRuns"
)

// The prober's tests.
const (
	tProbeExec       = "runtime/probe.TestExec"
	tProbeTCP        = "runtime/probe.TestTCPSocket"
	tProbeGRPC       = "runtime/probe.TestGRPC"
	tResolveTCPGRPC  = "reconcile.TestResolveTCPSocketAndGRPC"
	tProberThreshold = "reconcile/prober.TestLivenessFailureAfterThreshold"
	tProberSuccesses = "reconcile/prober.TestReadinessFlipsAndEventsPerFailedProbe"
	tProberDelay     = "reconcile/prober.TestInitialDelayFromTheInstanceStart"
	tProberStartup   = "reconcile/prober.TestStartupGatesLivenessAndReadiness"
	tProberStartFail = "reconcile/prober.TestStartupFailureAsksForASync"
	tE2ELiveness     = "test/e2e.TestLivenessExecFailureRestartsTheContainer"
	tE2EReadiness    = "test/e2e.TestHTTPReadinessFlipsReadyBothWays"
	tE2EStartup      = "test/e2e.TestStartupProbeHoldsLivenessOff"
	tE2ETCPGRPC      = "test/e2e.TestTCPSocketAndGRPCProbes"
	tCtrdLiveness    = "test/e2e/containerd/pods.TestLivenessExecFailureRestartsTheContainer"
	tProbeKillGrace  = "reconcile.TestProbeKillTakesTheProbesGracePeriod"
)

// probeAnswers answers for every field of the three probes: the handlers
// and the timing are the same code for each kind.
func probeAnswers() []fieldAnswer {
	var out []fieldAnswer
	for _, kind := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
		p := "spec.containers." + kind + "."
		kindTests := map[string][]string{
			"livenessProbe":  {tProberThreshold, tE2ELiveness, tCtrdLiveness},
			"readinessProbe": {tProberSuccesses, tE2EReadiness},
			"startupProbe":   {tProberStartup, tProberStartFail, tE2EStartup},
		}[kind]
		with := func(tests ...string) []string { return append(tests, kindTests...) }
		probe := func(handler map[string]any) func(m map[string]any) {
			return func(m map[string]any) { container0(m)[kind] = handler }
		}
		out = append(out,
			fieldAnswer{path: p + "exec.command", tests: with(tProbeExec, tE2ELiveness, tE2EStartup)},
			fieldAnswer{path: p + "httpGet.path", tests: with(tHTTPGetHandler, tResolveHTTPGet, tE2EReadiness)},
			fieldAnswer{path: p + "httpGet.port", tests: with(tResolveHTTPGet, tE2EReadiness)},
			fieldAnswer{path: p + "httpGet.host", tests: with(tResolveHTTPGet)},
			fieldAnswer{path: p + "httpGet.scheme", tests: with(tResolveHTTPGet, tHTTPGetHandler)},
			fieldAnswer{path: p + "httpGet.httpHeaders.name", tests: with(tResolveHTTPGet, tHTTPGetHandler)},
			fieldAnswer{path: p + "httpGet.httpHeaders.value", tests: with(tResolveHTTPGet, tHTTPGetHandler)},
			fieldAnswer{path: p + "httpGet.protocol", note: "HTTP1 (the default) only",
				rejects: probe(map[string]any{"httpGet": map[string]any{"port": 80, "protocol": "HTTP2"}})},
			fieldAnswer{path: p + "tcpSocket.port", tests: with(tProbeTCP, tResolveTCPGRPC, tE2ETCPGRPC)},
			fieldAnswer{path: p + "tcpSocket.host", tests: with(tResolveTCPGRPC)},
			fieldAnswer{path: p + "grpc.port", tests: with(tProbeGRPC, tResolveTCPGRPC, tE2ETCPGRPC)},
			fieldAnswer{path: p + "grpc.service", tests: with(tProbeGRPC, tResolveTCPGRPC, tE2ETCPGRPC)},
			fieldAnswer{path: p + "grpc.mode", note: "Plaintext (the default) only",
				rejects: probe(map[string]any{"grpc": map[string]any{"port": 50051, "mode": "TLS"}})},
			fieldAnswer{path: p + "initialDelaySeconds", tests: with(tProberDelay)},
			fieldAnswer{path: p + "periodSeconds", tests: with(tProberThreshold, tProberDelay)},
			fieldAnswer{path: p + "timeoutSeconds", tests: with(tProbeExec, tProbeGRPC, tHTTPGetHandler)},
			fieldAnswer{path: p + "successThreshold", tests: with(tProberSuccesses)},
			fieldAnswer{path: p + "failureThreshold", tests: with(tProberThreshold)},
		)
		if kind == "readinessProbe" {
			out = append(out, fieldAnswer{path: p + "terminationGracePeriodSeconds", kind: ErrInvalid,
				rejects: probe(map[string]any{"exec": map[string]any{"command": []any{"true"}}, "terminationGracePeriodSeconds": 5})})
		} else {
			out = append(out, fieldAnswer{path: p + "terminationGracePeriodSeconds", tests: with(tProbeKillGrace)})
		}
	}
	return out
}

// apiServer is the answer for the API server's bookkeeping.
const apiServer = "the API server's bookkeeping; kubelet does not read it to run the pod"

func scheduler(what string) string {
	return what + ": the scheduler's; a pod reaches this node already placed on it"
}

var fieldAnswers = []fieldAnswer{
	// ---- The prober (merged): the probes' fields are probeAnswers'. ----
	{path: "spec.containers.ports.name", tests: []string{tHTTPGetHook, tResolveHTTPGet, tE2EReadiness}, note: "probes and hooks reach a port by name"},

	// ---- The hooks work (merged): postStart and preStop, sidecars,
	// termination messages, activeDeadlineSeconds, stopSignal. ----
	{path: "spec.containers.lifecycle.postStart.exec.command", tests: []string{tPostStartFails, tE2EPostStartFails}},
	{path: "spec.containers.lifecycle.preStop.exec.command", tests: []string{tPreStop, tE2EPreStop, tCtrdPreStop}},
	{path: "spec.containers.lifecycle.preStop.sleep.seconds", tests: []string{tPreStopSleep}},
	{path: "spec.containers.lifecycle.preStop.httpGet.path", tests: []string{tHTTPGetHook, tHTTPGetHandler}},
	{path: "spec.containers.lifecycle.preStop.httpGet.port", tests: []string{tHTTPGetHook, tResolveHTTPGet}},
	{path: "spec.containers.lifecycle.preStop.httpGet.host", tests: []string{tResolveHTTPGet}},
	{path: "spec.containers.lifecycle.preStop.httpGet.scheme", tests: []string{tHTTPGetHook, tResolveHTTPGet}},
	{path: "spec.containers.lifecycle.preStop.httpGet.httpHeaders.name", tests: []string{tResolveHTTPGet, tHTTPGetHandler}},
	{path: "spec.containers.lifecycle.preStop.httpGet.httpHeaders.value", tests: []string{tResolveHTTPGet, tHTTPGetHandler}},
	{path: "spec.containers.lifecycle.preStop.httpGet.protocol", note: "HTTP1 (the default) only", rejects: func(m map[string]any) {
		container0(m)["lifecycle"] = map[string]any{"preStop": map[string]any{"httpGet": map[string]any{"port": 80, "protocol": "HTTP2"}}}
	}},
	// postStart's httpGet and sleep run through the code preStop's do
	// (resolution, handler), driven on postStart by these.
	{path: "spec.containers.lifecycle.postStart.sleep.seconds", tests: []string{tPostStartSleep}},
	{path: "spec.containers.lifecycle.postStart.httpGet.path", tests: []string{tPostStartHTTPGet, tHTTPGetHandler}},
	{path: "spec.containers.lifecycle.postStart.httpGet.port", tests: []string{tPostStartHTTPGet, tResolveHTTPGet}},
	{path: "spec.containers.lifecycle.postStart.httpGet.host", tests: []string{tResolveHTTPGet}},
	{path: "spec.containers.lifecycle.postStart.httpGet.scheme", tests: []string{tPostStartHTTPGet, tResolveHTTPGet}},
	{path: "spec.containers.lifecycle.postStart.httpGet.httpHeaders.name", tests: []string{tResolveHTTPGet, tHTTPGetHandler}},
	{path: "spec.containers.lifecycle.postStart.httpGet.httpHeaders.value", tests: []string{tResolveHTTPGet, tHTTPGetHandler}},
	{path: "spec.containers.lifecycle.postStart.httpGet.protocol", note: "HTTP1 (the default) only", rejects: func(m map[string]any) {
		container0(m)["lifecycle"] = map[string]any{"postStart": map[string]any{"httpGet": map[string]any{"port": 80, "protocol": "HTTP2"}}}
	}},
	{path: "spec.containers.lifecycle.stopSignal", tests: []string{tStopSignalConfig, tE2EStopSignal, tProcStopSignal}},
	{path: "spec.containers.terminationMessagePath", tests: []string{tTerminationMessage, tE2ETerminationMessage}},
	{path: "spec.containers.terminationMessagePolicy", tests: []string{tTerminationFallback}},
	{path: "spec.activeDeadlineSeconds", tests: []string{tKillPastDeadline, tWorkersDeadline, tE2EDeadline}},
	{path: "spec.containers.restartPolicy", tests: []string{tSidecars, tE2ESidecar, tCtrdSidecar, tRestartRules, tPolicyNever},
		note: "a container's own restart policy; on an init container, Always makes it a sidecar"},

	// ---- Containers. ----
	{path: "spec.containers.name", tests: []string{tContainerConfig, tSyncPodStarts, tInitInOrder}},
	{path: "spec.containers.image", tests: []string{tContainerConfig, tCtrdStarts}},
	{path: "spec.containers.imagePullPolicy", tests: []string{tImagePullBackOff, tPullPolicy}},
	{path: "spec.containers.command", tests: []string{tContainerConfig, tSyncPodStarts}},
	{path: "spec.containers.args", tests: []string{tContainerConfig}},
	{path: "spec.containers.workingDir", tests: []string{tSpecFields}},
	{path: "spec.containers.stdin", tests: []string{tSpecFields}},
	{path: "spec.containers.stdinOnce", tests: []string{tSpecFields}},
	{path: "spec.containers.tty", tests: []string{tSpecFields}},
	{path: "spec.containers.env.name", tests: []string{tContainerConfig, tSyncPodStarts}},
	{path: "spec.containers.env.value", tests: []string{tContainerConfig, tSyncPodStarts}},
	{path: "spec.containers.env.valueFrom.fieldRef.apiVersion", tests: []string{tSpecFields}},
	{path: "spec.containers.env.valueFrom.fieldRef.fieldPath", tests: []string{tSpecFields, tSyncPodStarts}},
	{path: "spec.containers.env.valueFrom.resourceFieldRef.containerName", tests: []string{tResourceFieldRef, tE2EFields}},
	{path: "spec.containers.env.valueFrom.resourceFieldRef.resource", tests: []string{tResourceFieldRef, tE2EFields, tCtrdFields}},
	{path: "spec.containers.env.valueFrom.resourceFieldRef.divisor", tests: []string{tResourceFieldRef, tE2EFields}},
	{path: "spec.containers.env.valueFrom.fileKeyRef", subtree: true, rejects: func(m map[string]any) {
		container0(m)["env"] = []any{map[string]any{"name": "A", "valueFrom": map[string]any{"fileKeyRef": map[string]any{"volumeName": "v", "path": "p", "key": "k"}}}}
	}},
	{path: "spec.containers.ports.containerPort", tests: []string{tSandboxFields, tContainerConfig}},
	{path: "spec.containers.ports.hostPort", tests: []string{tSandboxFields, tHostPorts, tPodSecurity}},
	{path: "spec.containers.ports.hostIP", tests: []string{tSandboxFields}},
	{path: "spec.containers.ports.protocol", tests: []string{tSandboxFields}},
	{path: "spec.containers.resources.limits", tests: []string{tContainerConfig, tSpecFields, tResourceFieldRef, tResizeInPlace, tE2EResize},
		note: "cpu, memory and hugepages-<size> enforced through the CRI; cpu and memory resized in place",
		rejects: func(m map[string]any) {
			container0(m)["resources"] = map[string]any{"limits": map[string]any{"ephemeral-storage": "1Gi"}}
		}},
	{path: "spec.containers.resources.requests", tests: []string{tContainerConfig, tResourceFieldRef, tResources, tE2EAdmission, tAdmissionRace, tResizeAdmitted},
		note: "cpu becomes CPU shares; memory and ephemeral-storage requests are the scheduler's (kubelet enforces none either); a change is a resize admission decides"},
	{path: "spec.containers.resources.claims", subtree: true, rejects: func(m map[string]any) {
		container0(m)["resources"] = map[string]any{"claims": []any{map[string]any{"name": "gpu"}}}
	}},
	{path: "spec.containers.resizePolicy.resourceName", tests: []string{tResizePlan, tResizePolicy}, note: "in-place resize, see In-place resize"},
	{path: "spec.containers.resizePolicy.restartPolicy", tests: []string{tResizePlan, tResizePolicy, tResizeInPlace}, note: "NotRequired: UpdateContainerResources; RestartContainer: that container restarts"},
	{path: "spec.containers.restartPolicyRules.action", tests: []string{tRestartRules, tE2ERestartRule},
		note: "app containers; refused on init containers, whose rules kubelet does not evaluate",
		rejects: func(m map[string]any) {
			container0(m)["restartPolicy"] = "Never"
			container0(m)["restartPolicyRules"] = []any{map[string]any{"action": "RestartAllContainers", "exitCodes": map[string]any{"operator": "In", "values": []any{42}}}}
		}},
	{path: "spec.containers.restartPolicyRules.exitCodes.operator", tests: []string{tRestartRules, tE2ERestartRule}},
	{path: "spec.containers.restartPolicyRules.exitCodes.values", tests: []string{tRestartRules, tE2ERestartRule}},
	{path: "spec.containers.volumeMounts.name", tests: []string{tContainerConfig, tSpecFields}},
	{path: "spec.containers.volumeMounts.mountPath", tests: []string{tContainerConfig, tSpecFields}},
	{path: "spec.containers.volumeMounts.readOnly", tests: []string{tSpecFields}},
	{path: "spec.containers.volumeMounts.recursiveReadOnly", tests: []string{tSpecFields}, note: "IfPossible is a plain read-only mount"},
	{path: "spec.containers.volumeMounts.mountPropagation", tests: []string{tSpecFields}},
	{path: "spec.containers.volumeMounts.subPath", tests: []string{tSpecFields, tMemoryEmptyDir, tSubPathBound, tE2ESubPath}},
	{path: "spec.containers.volumeMounts.subPathExpr", tests: []string{tSpecFields}},
	{path: "spec.containers.volumeMounts.bindMountOptions", rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "d", "emptyDir": map[string]any{}}}
		container0(m)["volumeMounts"] = []any{map[string]any{"name": "d", "mountPath": "/d", "bindMountOptions": []any{"rbind"}}}
	}},
	{path: "spec.containers.volumeDevices", subtree: true, rejects: func(m map[string]any) {
		container0(m)["volumeDevices"] = []any{map[string]any{"name": "d", "devicePath": "/dev/x"}}
	}},
	{path: "spec.containers.lifecycle.postStart.tcpSocket", subtree: true, rejects: func(m map[string]any) {
		container0(m)["lifecycle"] = map[string]any{"postStart": map[string]any{"tcpSocket": map[string]any{"port": 80}}}
	}},
	{path: "spec.containers.lifecycle.preStop.tcpSocket", subtree: true, rejects: func(m map[string]any) {
		container0(m)["lifecycle"] = map[string]any{"preStop": map[string]any{"tcpSocket": map[string]any{"port": 80}}}
	}},
	{path: "spec.containers.securityContext.privileged", tests: []string{tContainerConfig, tPrivileged, tPodSecurity},
		note: "refused at admission (PodSecurity) below --pod-security privileged"},
	{path: "spec.containers.securityContext.allowPrivilegeEscalation", tests: []string{tSpecFields}},
	{path: "spec.containers.securityContext.capabilities.add", tests: []string{tSpecFields}},
	{path: "spec.containers.securityContext.capabilities.drop", tests: []string{tSpecFields}},
	{path: "spec.containers.securityContext.readOnlyRootFilesystem", tests: []string{tSpecFields}},
	{path: "spec.containers.securityContext.runAsUser", tests: []string{tSpecFields, tRunAsNonRoot}},
	{path: "spec.containers.securityContext.runAsGroup", tests: []string{tSpecFields}},
	{path: "spec.containers.securityContext.runAsNonRoot", tests: []string{tRunAsNonRoot}},
	{path: "spec.containers.securityContext.seccompProfile.type", tests: []string{tSpecFields}},
	{path: "spec.containers.securityContext.seccompProfile.localhostProfile", tests: []string{tSpecFields}, note: "under <data-dir>/seccomp"},
	{path: "spec.containers.securityContext.appArmorProfile.type", tests: []string{tSpecFields}},
	{path: "spec.containers.securityContext.appArmorProfile.localhostProfile", tests: []string{tSpecFields}},
	{path: "spec.containers.securityContext.seLinuxOptions.user", tests: []string{tSpecFields}},
	{path: "spec.containers.securityContext.seLinuxOptions.role", tests: []string{tSpecFields}},
	{path: "spec.containers.securityContext.seLinuxOptions.type", tests: []string{tSpecFields}},
	{path: "spec.containers.securityContext.seLinuxOptions.level", tests: []string{tSpecFields}},
	{path: "spec.containers.securityContext.procMount", tests: []string{tUserns, tUnmaskedProc}, kind: ErrInvalid,
		note: "Unmasked only with hostUsers false, as the API server", rejects: func(m map[string]any) {
			container0(m)["securityContext"] = map[string]any{"procMount": "Unmasked"}
		}},
	{path: "spec.containers.securityContext.windowsOptions", subtree: true, rejects: func(m map[string]any) {
		container0(m)["securityContext"] = map[string]any{"windowsOptions": map[string]any{"runAsUserName": "x"}}
	}},

	// ---- The pod. ----
	{path: "spec.restartPolicy", tests: []string{tComputePodActions, tOnFailure}},
	{path: "spec.terminationGracePeriodSeconds", tests: []string{tKillGrace, tCtrdGrace}},
	{path: "spec.nodeName", tests: []string{tSpecFields}, kind: ErrInvalid, rejects: func(m map[string]any) {
		specOf(m)["nodeName"] = "another-node"
	}},
	{path: "spec.hostname", tests: []string{tSandboxFields}},
	{path: "spec.hostnameOverride", tests: []string{tSandboxFields}},
	{path: "spec.hostNetwork", tests: []string{tSandboxFields, tCtrdStarts, "test/e2e.TestCNIPodsGetTheirOwnIPsAndReachEachOther"},
		note: "the pod's IPs are the node's when the runtime gives its sandbox none, as kubelet's (`reconcile.TestPodIPs`)"},
	{path: "spec.hostPID", tests: []string{tSandboxFields, tPodSecurity, tE2EPodSecurity}},
	{path: "spec.hostIPC", tests: []string{tSandboxFields}},
	{path: "spec.shareProcessNamespace", tests: []string{tSandboxFields}},
	{path: "spec.hostUsers", tests: []string{tUserns, tUsernsRuntime, tUsernsAllocator, "test/e2e.TestAPodWithoutHostUsersIsNotRootOnTheHost", "schemas.TestDecodeIntentErrors"},
		note: "false: a user namespace of the pod's own; rejected with hostNetwork, hostPID or hostIPC, or on a runtime without user namespaces"},
	{path: "spec.os.name", note: "linux only", rejects: func(m map[string]any) { specOf(m)["os"] = map[string]any{"name": "windows"} }},
	{path: "spec.dnsPolicy", tests: []string{tPodDNS, tE2EHostsDNS},
		note: "ClusterFirst needs `--cluster-dns` (without it, the node's resolver and a MissingClusterDNS event, as kubelet)"},
	{path: "spec.dnsConfig.nameservers", tests: []string{tPodDNS, tE2EHostsDNS, tCtrdHostsDNS}},
	{path: "spec.dnsConfig.searches", tests: []string{tPodDNS, tE2EHostsDNS, tCtrdHostsDNS}},
	{path: "spec.dnsConfig.options.name", tests: []string{tPodDNS, tE2EHostsDNS}},
	{path: "spec.dnsConfig.options.value", tests: []string{tPodDNS, tE2EHostsDNS}},
	{path: "spec.hostAliases.ip", tests: []string{tEtcHosts, tE2EHostsDNS, tCtrdHostsDNS}},
	{path: "spec.hostAliases.hostnames", tests: []string{tEtcHosts, tE2EHostsDNS, tCtrdHostsDNS}},
	{path: "spec.subdomain", tests: []string{tEtcHosts, tE2EHostsDNS}, note: "with `--cluster-domain`"},
	{path: "spec.setHostnameAsFQDN", tests: []string{"reconcile.TestSandboxHostnameAsFQDN", tE2EHostsDNS}, note: "a name over 64 characters fails the sandbox, as kubelet's"},
	{path: "spec.runtimeClassName", rejects: func(m map[string]any) { specOf(m)["runtimeClassName"] = "gvisor" }},
	{path: "spec.overhead", rejects: func(m map[string]any) { specOf(m)["overhead"] = map[string]any{"cpu": "100m"} }},
	{path: "spec.readinessGates", subtree: true, rejects: func(m map[string]any) {
		specOf(m)["readinessGates"] = []any{map[string]any{"conditionType": "example.com/ready"}}
	}},
	{path: "spec.resources.limits", tests: []string{tPodResources, tPodResourcesCgroup, tPodResourcesResize, tE2EPodResources},
		note: "pod-level (KEP-2837): cpu, memory and hugepages-<size>; the pod cgroup's limits, resized in place (KEP-5419)",
		rejects: func(m map[string]any) {
			specOf(m)["resources"] = map[string]any{"limits": map[string]any{"ephemeral-storage": "1Gi"}}
		}},
	{path: "spec.resources.requests", tests: []string{tPodResources, tPodResourcesDefaults, tPodResourcesCgroup, tResources, tQOS, tE2EPodResources},
		note: "pod-level: the pod's requests for admission, QoS and eviction, its cpu shares; a change is a resize admission decides"},
	{path: "spec.resources.claims", subtree: true, rejects: func(m map[string]any) {
		specOf(m)["resources"] = map[string]any{"claims": []any{map[string]any{"name": "gpu"}}}
	}},
	{path: "spec.resourceClaims", subtree: true, rejects: func(m map[string]any) {
		specOf(m)["resourceClaims"] = []any{map[string]any{"name": "gpu"}}
	}},
	{path: "spec.ephemeralContainers", subtree: true, rejects: func(m map[string]any) {
		specOf(m)["ephemeralContainers"] = []any{map[string]any{"name": "debug", "image": "busybox"}}
	}},
	{path: "spec.securityContext.runAsUser", tests: []string{tSpecFields, tRunAsNonRoot}},
	{path: "spec.securityContext.runAsGroup", tests: []string{tSpecFields}},
	{path: "spec.securityContext.runAsNonRoot", tests: []string{tRunAsNonRoot}},
	{path: "spec.securityContext.supplementalGroups", tests: []string{tSpecFields}},
	{path: "spec.securityContext.supplementalGroupsPolicy", tests: []string{tSpecFields}},
	{path: "spec.securityContext.fsGroup", tests: []string{tSpecFields, tSandboxFields, tEmptyDirMode}},
	{path: "spec.securityContext.fsGroupChangePolicy", tests: []string{tEmptyDirMode},
		note: "emptyDirs are new, so both policies change the same; hostPath volumes are never changed, as kubelet"},
	{path: "spec.securityContext.sysctls.name", tests: []string{tSandboxFields}},
	{path: "spec.securityContext.sysctls.value", tests: []string{tSandboxFields}},
	{path: "spec.securityContext.seccompProfile.type", tests: []string{tSpecFields, tSandboxFields}},
	{path: "spec.securityContext.seccompProfile.localhostProfile", tests: []string{tSpecFields}},
	{path: "spec.securityContext.appArmorProfile.type", tests: []string{tSpecFields}},
	{path: "spec.securityContext.appArmorProfile.localhostProfile", tests: []string{tSpecFields}},
	{path: "spec.securityContext.seLinuxOptions.user", tests: []string{tSpecFields}},
	{path: "spec.securityContext.seLinuxOptions.role", tests: []string{tSpecFields}},
	{path: "spec.securityContext.seLinuxOptions.type", tests: []string{tSpecFields}},
	{path: "spec.securityContext.seLinuxOptions.level", tests: []string{tSpecFields}},
	{path: "spec.securityContext.seLinuxChangePolicy", rejects: func(m map[string]any) {
		specOf(m)["securityContext"] = map[string]any{"seLinuxChangePolicy": "MountOption"}
	}},
	{path: "spec.securityContext.windowsOptions", subtree: true, rejects: func(m map[string]any) {
		specOf(m)["securityContext"] = map[string]any{"windowsOptions": map[string]any{"runAsUserName": "x"}}
	}},
	{path: "spec.serviceAccountName", tests: []string{tSpecFields}, note: "the downward API's spec.serviceAccountName; its token is the API server's to mount"},
	{path: "spec.serviceAccount", nothing: "the deprecated alias of serviceAccountName, which the API server fills in"},
	{path: "spec.automountServiceAccountToken", nothing: "the API server's ServiceAccount admission acts on it (the token volume it adds is a projected volume, rejected)"},
	{path: "spec.enableServiceLinks", nothing: "service environment variables come from the API server's Services, of which this node has none"},
	{path: "spec.evictionResponders", subtree: true, nothing: "the API server's Eviction API"},
	{path: "spec.nodeSelector", tests: []string{tNodeAffinity, tE2EAdmission}, note: "refused at admission (NodeAffinity) when the node's labels do not match"},
	{path: "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.matchExpressions.key", tests: []string{tNodeAffinity}},
	{path: "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.matchExpressions.operator", tests: []string{tNodeAffinity}},
	{path: "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.matchExpressions.values", tests: []string{tNodeAffinity}},
	{path: "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.matchFields.key", tests: []string{tNodeAffinity}},
	{path: "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.matchFields.operator", tests: []string{tNodeAffinity}},
	{path: "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.matchFields.values", tests: []string{tNodeAffinity}},
	{path: "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution", subtree: true, nothing: scheduler("preferred node affinity")},
	{path: "spec.affinity.podAffinity", subtree: true, nothing: scheduler("pod affinity")},
	{path: "spec.affinity.podAntiAffinity", subtree: true, nothing: scheduler("pod anti-affinity")},
	{path: "spec.tolerations.key", tests: []string{tTaints, tNodePressure}},
	{path: "spec.tolerations.operator", tests: []string{tTaints}},
	{path: "spec.tolerations.value", tests: []string{tTaints}},
	{path: "spec.tolerations.effect", tests: []string{tTaints}},
	{path: "spec.tolerations.tolerationSeconds", nothing: "the control plane's taint-based eviction; a node's own taints are fixed when it starts"},
	{path: "spec.topologySpreadConstraints", subtree: true, nothing: scheduler("spreading")},
	{path: "spec.schedulerName", nothing: scheduler("the scheduler's name")},
	{path: "spec.schedulingGates", subtree: true, nothing: scheduler("scheduling gates")},
	{path: "spec.schedulingGroup", subtree: true, nothing: scheduler("the scheduling group")},
	{path: "spec.priority", tests: []string{"reconcile/eviction.TestIsCritical", "reconcile/eviction.TestRankMemoryPressure", tNodePressure, "reconcile/nodeshutdown.TestGroupByPriority", "reconcile/podworkers.TestPendingResizeOrder", "reconcile/podworkers.TestTheHigherPriorityTakesTheRoomFirst"},
		kind: ErrInvalid, note: "critical pods, the order of eviction, of the node's shutdown and of deferred resizes", rejects: func(m map[string]any) {
			specOf(m)["priorityClassName"], specOf(m)["priority"] = "system-node-critical", 1
		}},
	{path: "spec.priorityClassName", tests: []string{"schemas.TestSystemPriorityClassesGiveTheirPriority", "reconcile/eviction.TestIsCritical"},
		note: "system-node-critical and system-cluster-critical give their priority, as the API server's Priority admission; other classes are the scheduler's"},
	{path: "spec.preemptionPolicy", nothing: scheduler("preemption")},

	// ---- Metadata. ----
	{path: "metadata.name", tests: []string{tSandboxFields, tSyncPodStarts}},
	{path: "metadata.namespace", tests: []string{tSandboxFields, tSyncPodStarts}},
	{path: "metadata.uid", tests: []string{tSandboxFields, tSyncPodStarts}},
	{path: "metadata.labels", tests: []string{tSandboxFields, tSpecFields}},
	{path: "metadata.annotations", tests: []string{tSandboxFields, tSpecFields}},
	{path: "metadata.deletionGracePeriodSeconds", tests: []string{"reconcile.TestDeletionGracePeriodSecondsWinsForKills"}},
	{path: "metadata.deletionTimestamp", tests: []string{tComputePodActions}, note: "no container is started again; a delete is an intent with op delete"},
	{path: "metadata.generateName", nothing: apiServer},
	{path: "metadata.selfLink", nothing: apiServer},
	{path: "metadata.resourceVersion", nothing: apiServer},
	{path: "metadata.generation", nothing: apiServer},
	{path: "metadata.creationTimestamp", nothing: apiServer},
	{path: "metadata.ownerReferences", subtree: true, nothing: apiServer},
	{path: "metadata.finalizers", nothing: apiServer},
	{path: "metadata.managedFields", subtree: true, nothing: apiServer},

	// ---- ConfigMaps and Secrets (the config issue's). ----
	{path: "spec.containers.env.valueFrom.configMapKeyRef.key", tests: []string{"reconcile.TestEnvFromConfigMapsAndSecrets", "reconcile.TestEnvWaitsForItsObjects", tE2EConfig}},
	{path: "spec.containers.env.valueFrom.configMapKeyRef.name", tests: []string{"reconcile.TestEnvFromConfigMapsAndSecrets", "reconcile.TestEnvWaitsForItsObjects", tE2EConfig}},
	{path: "spec.containers.env.valueFrom.configMapKeyRef.optional", tests: []string{"reconcile.TestEnvFromConfigMapsAndSecrets", "reconcile.TestEnvWaitsForItsObjects", tE2EConfig}},
	{path: "spec.containers.env.valueFrom.secretKeyRef.key", tests: []string{"reconcile.TestEnvFromConfigMapsAndSecrets", "reconcile.TestEnvWaitsForItsObjects", tE2EConfig}},
	{path: "spec.containers.env.valueFrom.secretKeyRef.name", tests: []string{"reconcile.TestEnvFromConfigMapsAndSecrets", "reconcile.TestEnvWaitsForItsObjects", tE2EConfig}},
	{path: "spec.containers.env.valueFrom.secretKeyRef.optional", tests: []string{"reconcile.TestEnvFromConfigMapsAndSecrets", "reconcile.TestEnvWaitsForItsObjects", tE2EConfig}},
	{path: "spec.containers.envFrom.configMapRef.name", tests: []string{"reconcile.TestEnvFromConfigMapsAndSecrets", "reconcile.TestEnvWaitsForItsObjects", tE2EConfig}},
	{path: "spec.containers.envFrom.configMapRef.optional", tests: []string{"reconcile.TestEnvFromConfigMapsAndSecrets", "reconcile.TestEnvWaitsForItsObjects", tE2EConfig}},
	{path: "spec.containers.envFrom.prefix", tests: []string{"reconcile.TestEnvFromConfigMapsAndSecrets", "reconcile.TestEnvWaitsForItsObjects", tE2EConfig}},
	{path: "spec.containers.envFrom.secretRef.name", tests: []string{"reconcile.TestEnvFromConfigMapsAndSecrets", "reconcile.TestEnvWaitsForItsObjects", tE2EConfig}},
	{path: "spec.containers.envFrom.secretRef.optional", tests: []string{"reconcile.TestEnvFromConfigMapsAndSecrets", "reconcile.TestEnvWaitsForItsObjects", tE2EConfig}},
	{path: "spec.imagePullSecrets.name", tests: []string{"reconcile.TestImagePullSecretsBeforeTheNodesCredentials"}},
	{path: "spec.volumes.configMap.defaultMode", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeWaitsForItsConfigMap", "reconcile.TestVolumesFollowTheirObjectsWhileThePodRuns", tE2EConfig}},
	{path: "spec.volumes.configMap.items.key", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeWaitsForItsConfigMap", "reconcile.TestVolumesFollowTheirObjectsWhileThePodRuns", tE2EConfig}},
	{path: "spec.volumes.configMap.items.mode", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeWaitsForItsConfigMap", "reconcile.TestVolumesFollowTheirObjectsWhileThePodRuns", tE2EConfig}},
	{path: "spec.volumes.configMap.items.path", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeWaitsForItsConfigMap", "reconcile.TestVolumesFollowTheirObjectsWhileThePodRuns", tE2EConfig}},
	{path: "spec.volumes.configMap.name", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeWaitsForItsConfigMap", "reconcile.TestVolumesFollowTheirObjectsWhileThePodRuns", tE2EConfig}},
	{path: "spec.volumes.configMap.optional", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeWaitsForItsConfigMap", "reconcile.TestVolumesFollowTheirObjectsWhileThePodRuns", tE2EConfig}},
	{path: "spec.volumes.downwardAPI.defaultMode", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestNoObjectSource"}},
	{path: "spec.volumes.downwardAPI.items.fieldRef.apiVersion", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestNoObjectSource"}},
	{path: "spec.volumes.downwardAPI.items.fieldRef.fieldPath", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestNoObjectSource"}},
	{path: "spec.volumes.downwardAPI.items.mode", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestNoObjectSource"}},
	{path: "spec.volumes.downwardAPI.items.path", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestNoObjectSource"}},
	{path: "spec.volumes.downwardAPI.items.resourceFieldRef.containerName", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestNoObjectSource"}},
	{path: "spec.volumes.downwardAPI.items.resourceFieldRef.divisor", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestNoObjectSource"}},
	{path: "spec.volumes.downwardAPI.items.resourceFieldRef.resource", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestNoObjectSource"}},
	{path: "spec.volumes.projected.defaultMode", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestInMemoryVolumesAreTmpfsUnmountedByGC", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.configMap.items.key", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.configMap.items.mode", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.configMap.items.path", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.configMap.name", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.configMap.optional", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.downwardAPI.items.fieldRef.apiVersion", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.downwardAPI.items.fieldRef.fieldPath", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.downwardAPI.items.mode", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.downwardAPI.items.path", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.downwardAPI.items.resourceFieldRef.containerName", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.downwardAPI.items.resourceFieldRef.divisor", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.downwardAPI.items.resourceFieldRef.resource", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.secret.items.key", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.secret.items.mode", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.secret.items.path", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.secret.name", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.projected.sources.secret.optional", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestVolumeItemsWithMissingKeys"}},
	{path: "spec.volumes.secret.defaultMode", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestInMemoryVolumesAreTmpfsUnmountedByGC", "reconcile.TestVolumeItemsWithMissingKeys", tE2EConfig}},
	{path: "spec.volumes.secret.items.key", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestInMemoryVolumesAreTmpfsUnmountedByGC", "reconcile.TestVolumeItemsWithMissingKeys", tE2EConfig}},
	{path: "spec.volumes.secret.items.mode", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestInMemoryVolumesAreTmpfsUnmountedByGC", "reconcile.TestVolumeItemsWithMissingKeys", tE2EConfig}},
	{path: "spec.volumes.secret.items.path", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestInMemoryVolumesAreTmpfsUnmountedByGC", "reconcile.TestVolumeItemsWithMissingKeys", tE2EConfig}},
	{path: "spec.volumes.secret.optional", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestInMemoryVolumesAreTmpfsUnmountedByGC", "reconcile.TestVolumeItemsWithMissingKeys", tE2EConfig}},
	{path: "spec.volumes.secret.secretName", tests: []string{"reconcile.TestAPIDataVolumesAreWrittenBeforeTheContainers", "reconcile.TestInMemoryVolumesAreTmpfsUnmountedByGC", "reconcile.TestVolumeItemsWithMissingKeys", tE2EConfig}},
	{path: "spec.volumes.configMap.defaultUser", rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "configMap": map[string]any{"name": "c", "defaultUser": 5}}}
	}},
	{path: "spec.volumes.configMap.items.user", rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "configMap": map[string]any{"name": "c", "items": []any{map[string]any{"key": "k", "path": "p", "user": 5}}}}}
	}},
	{path: "spec.volumes.secret.defaultUser", rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "secret": map[string]any{"secretName": "s", "defaultUser": 5}}}
	}},
	{path: "spec.volumes.secret.items.user", rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "secret": map[string]any{"secretName": "s", "items": []any{map[string]any{"key": "k", "path": "p", "user": 5}}}}}
	}},
	{path: "spec.volumes.downwardAPI.defaultUser", rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "downwardAPI": map[string]any{"defaultUser": 5}}}
	}},
	{path: "spec.volumes.downwardAPI.items.user", rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "downwardAPI": map[string]any{"items": []any{map[string]any{"path": "p", "fieldRef": map[string]any{"fieldPath": "metadata.name"}, "user": 5}}}}}
	}},
	{path: "spec.volumes.projected.defaultUser", rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "projected": map[string]any{"defaultUser": 5}}}
	}},
	{path: "spec.volumes.projected.sources.configMap.items.user", rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "projected": map[string]any{"sources": []any{map[string]any{"configMap": map[string]any{"name": "c", "items": []any{map[string]any{"key": "k", "path": "p", "user": 5}}}}}}}}
	}},
	{path: "spec.volumes.projected.sources.secret.items.user", rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "projected": map[string]any{"sources": []any{map[string]any{"secret": map[string]any{"name": "s", "items": []any{map[string]any{"key": "k", "path": "p", "user": 5}}}}}}}}
	}},
	{path: "spec.volumes.projected.sources.downwardAPI.items.user", rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "projected": map[string]any{"sources": []any{map[string]any{"downwardAPI": map[string]any{"items": []any{map[string]any{"path": "p", "fieldRef": map[string]any{"fieldPath": "metadata.name"}, "user": 5}}}}}}}}
	}},
	{path: "spec.volumes.projected.sources.serviceAccountToken", subtree: true, rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "projected": map[string]any{"sources": []any{map[string]any{"serviceAccountToken": map[string]any{"path": "t"}}}}}}
	}},
	{path: "spec.volumes.projected.sources.clusterTrustBundle", subtree: true, rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "projected": map[string]any{"sources": []any{map[string]any{"clusterTrustBundle": map[string]any{"path": "t", "signerName": "x"}}}}}}
	}},
	{path: "spec.volumes.projected.sources.podCertificate", subtree: true, rejects: func(m map[string]any) {
		specOf(m)["volumes"] = []any{map[string]any{"name": "v", "projected": map[string]any{"sources": []any{map[string]any{"podCertificate": map[string]any{"signerName": "x", "keyType": "ED25519"}}}}}}
	}},
	// ---- Volumes (every source but hostPath, emptyDir and the API data ones: volumeSourceAnswers). ----
	{path: "spec.volumes.name", tests: []string{tContainerConfig, tSpecFields}},
	{path: "spec.volumes.hostPath.path", tests: []string{tSpecFields, tPodSecurity, tE2EPodSecurity}},
	{path: "spec.volumes.hostPath.type", tests: []string{tSpecFields}},
	{path: "spec.volumes.emptyDir.medium", tests: []string{tMemoryEmptyDir, tE2EFields, tCtrdFields, "schemas.TestDecodeIntentErrors"},
		note: "Memory: a tmpfs jetlet mounts; rejected when jetlet does not run as root"},
	{path: "spec.volumes.emptyDir.sizeLimit", tests: []string{tMemoryEmptyDir, "reconcile.TestMemoryEmptyDirSize", tE2EFields}, note: "bounds the tmpfs's size",
		rejects: func(m map[string]any) {
			specOf(m)["volumes"] = []any{map[string]any{"name": "d", "emptyDir": map[string]any{"sizeLimit": "1Gi"}}}
		}},
	{path: "spec.volumes.emptyDir.mode", tests: []string{tEmptyDirMode}},
}

// volumeSourceAnswers rejects every volume source but hostPath, emptyDir,
// configMap, secret, downwardAPI and projected, the validator's rule,
// checked for each source the type has.
func volumeSourceAnswers() []fieldAnswer {
	var out []fieldAnswer
	for _, f := range jsonFields(reflect.TypeFor[corev1.VolumeSource]()) {
		if slices.Contains([]string{"hostPath", "emptyDir", "configMap", "secret", "downwardAPI", "projected"}, f.name) {
			continue
		}
		name := f.name
		out = append(out, fieldAnswer{path: "spec.volumes." + name, subtree: true, rejects: func(m map[string]any) {
			specOf(m)["volumes"] = []any{map[string]any{"name": "v", name: map[string]any{}}}
		}})
	}
	return out
}

// acceptedFieldPaths lists every leaf field of t under prefix that the
// decoder knows (the walk of checkTree), stopping where stop says an answer
// covers the whole subtree.
func acceptedFieldPaths(prefix string, t reflect.Type, stop func(string) bool, out map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if stop(prefix) {
		out[prefix] = true
		return
	}
	if t.Kind() != reflect.Struct || infoOf(t).leaf {
		out[prefix] = true
		return
	}
	for _, f := range jsonFields(t) {
		p := prefix + "." + f.name
		if p == "spec.initContainers" {
			p = "spec.containers" // classified alike
		}
		acceptedFieldPaths(p, f.typ, stop, out)
	}
}

// repoTests is every Test function of the repository's _test.go files, as
// "<package dir>.<TestName>".
func repoTests(t *testing.T) map[string]bool {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository root %s has no go.mod: %v", root, err)
	}
	tests := map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
				tests[filepath.ToSlash(dir)+"."+fn.Name.Name] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tests
}

var listIndex = regexp.MustCompile(`\[[^\]]*\]`)

// namedField is a problem's field as an answer's path: no "pod." and no
// indexes or keys.
func namedField(field string) string {
	return listIndex.ReplaceAllString(strings.TrimPrefix(field, "pod."), "")
}

// within reports whether a and b are the same field or one is inside the other.
func within(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+".") || strings.HasPrefix(b, a+".")
}

// rejection runs an answer's edit through DecodeIntent and returns the
// problem naming the answer's field.
func rejection(a fieldAnswer) (*ValidationError, error) {
	_, err := DecodeIntent(intentJSON(a.rejects), target)
	var problems ValidationErrors
	if !errors.As(err, &problems) {
		return nil, fmt.Errorf("accepted (error %v)", err)
	}
	kind := a.kind
	if kind == "" {
		kind = ErrUnsupported
	}
	for _, p := range problems {
		if within(namedField(p.Field), a.path) && p.Kind == kind {
			return p, nil
		}
	}
	return nil, fmt.Errorf("rejected, but not as %s naming the field: %v", kind, err)
}

func TestEveryAcceptedFieldIsHonouredOrRejected(t *testing.T) {
	answers := append(append(slices.Clone(fieldAnswers), volumeSourceAnswers()...), probeAnswers()...)
	byPath := map[string]fieldAnswer{}
	for _, a := range answers {
		if _, dup := byPath[a.path]; dup {
			t.Errorf("%s: answered twice", a.path)
		}
		if a.subtree && a.rejects == nil && a.nothing == "" && a.pending == "" {
			t.Errorf("%s: a subtree honoured by tests would hide the fields a new k8s.io/api adds under it: answer each field", a.path)
		}
		byPath[a.path] = a
	}
	paths := map[string]bool{}
	stop := func(p string) bool { return byPath[p].subtree }
	acceptedFieldPaths("metadata", reflect.TypeFor[metav1.ObjectMeta](), stop, paths)
	acceptedFieldPaths("spec", reflect.TypeFor[corev1.PodSpec](), stop, paths)

	known := repoTests(t)
	used := map[string]bool{}
	var pending []string
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range paths {
			if !yield(p) {
				return
			}
		}
	}) {
		a, ok := byPath[p]
		if !ok {
			t.Errorf("%s: accepted by DecodeIntent but neither honoured nor rejected: add it to fieldAnswers (audit_test.go) with its behaviour test, or reject it in the validate_*.go of its concern", p)
			continue
		}
		used[p] = true
		if a.pending != "" {
			pending = append(pending, p+" ("+a.pending+")")
		}
		if len(a.tests) == 0 && a.rejects == nil && a.nothing == "" && a.pending == "" {
			t.Errorf("%s: an answer with no test, rejection, reason or pending work", p)
		}
		for _, name := range a.tests {
			if !known[name] {
				t.Errorf("%s: behaviour test %s is not in the repository", p, name)
			}
		}
		if a.rejects != nil {
			if _, err := rejection(a); err != nil {
				t.Errorf("%s: the edit meant to be rejected is %v", p, err)
			}
		}
	}
	for _, a := range answers {
		if !used[a.path] {
			t.Errorf("%s: answered but not a field of corev1.PodSpec (any more): drop it", a.path)
		}
	}
	checkAuditTable(t, answers, used)
	if len(pending) > 0 {
		t.Logf("PENDING: %d fields are honoured by work merged beside this one; their behaviour tests are still to be named:\n\t%s",
			len(pending), strings.Join(pending, "\n\t"))
	}
}

// auditDoc holds the table of answers, generated from fieldAnswers between
// its markers; `go test ./schemas -run TestEveryAcceptedField -update`
// rewrites it.
const (
	auditDoc   = "../docs/reconcile.md"
	auditBegin = "<!-- fields table: generated by schemas/audit_test.go (go test ./schemas -update); do not edit -->\n"
	auditEnd   = "<!-- end of the fields table -->\n"
)

// checkAuditTable compares the docs' table with the answers (used: those
// that answer for some field).
func checkAuditTable(t *testing.T, answers []fieldAnswer, used map[string]bool) {
	t.Helper()
	var b strings.Builder
	b.WriteString(auditBegin)
	b.WriteString("\n| field (under the pod; containers: initContainers too) | answer |\n|---|---|\n")
	sorted := slices.Clone(answers)
	slices.SortFunc(sorted, func(a, b fieldAnswer) int { return strings.Compare(a.path, b.path) })
	for _, a := range sorted {
		if !used[a.path] {
			continue
		}
		field := "`" + a.path + "`"
		if a.subtree {
			field += " and below"
		}
		var parts []string
		if a.pending != "" {
			parts = append(parts, "**pending** ("+a.pending+")")
		}
		if len(a.tests) > 0 {
			names := make([]string, len(a.tests))
			for i, n := range a.tests {
				names[i] = "`" + n + "`"
			}
			parts = append(parts, "honoured: "+strings.Join(names, ", "))
		}
		if a.rejects != nil {
			if p, err := rejection(a); err == nil {
				what := "rejected"
				if len(a.tests) > 0 || a.pending != "" || a.note != "" {
					what = "otherwise rejected"
				}
				parts = append(parts, what+": "+strings.ReplaceAll(p.Reason, "|", "\\|"))
			}
		}
		if a.nothing != "" {
			parts = append(parts, "nothing to do: "+a.nothing)
		}
		if a.note != "" {
			parts = append(parts, "("+a.note+")")
		}
		fmt.Fprintf(&b, "| %s | %s |\n", field, strings.Join(parts, "; "))
	}
	b.WriteString("\n" + auditEnd)

	doc, err := os.ReadFile(auditDoc)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), auditBegin)
	_, after, ok2 := strings.Cut(rest, auditEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no fields table between %q and %q", auditDoc, auditBegin, auditEnd)
	}
	want := before + b.String() + after
	if *update {
		if err := os.WriteFile(auditDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != string(doc) {
		t.Errorf("the fields table of %s is stale: run go test ./schemas -run TestEveryAcceptedField -update", auditDoc)
	}
}
