package schemas

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The JSON Schemas are generated from the Go types by reflection, then the
// rules a JSON Schema can express are laid over them by hand below. Regenerate
// with `go generate ./schemas` (which runs this test with -update); the test
// fails when the checked-in files differ from what the types say.

var update = flag.Bool("update", false, "rewrite the generated *.schema.json files")

type obj = map[string]any

// nodeResourceNamePattern is resourceNamePattern with pods: a node's
// capacity counts them.
const nodeResourceNamePattern = `^(cpu|memory|pods|ephemeral-storage|hugepages-.+)$`

// podResourceNamePattern are the resources pod-level resources may name.
const podResourceNamePattern = `^(cpu|memory|hugepages-.+)$`

func TestJSONSchemasUpToDate(t *testing.T) {
	for _, name := range SchemaNames {
		got := generateSchema(name)
		file := name + ".schema.json"
		if *update {
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !bytes.Equal(got, JSONSchema(name)) {
			t.Errorf("%s is stale: run `go generate ./schemas`", file)
		}
	}
}

// generateSchema builds the schema of one message.
func generateSchema(name string) []byte {
	g := &schemaGen{defs: map[string]obj{}, names: map[reflect.Type]string{}}
	var root obj
	switch name {
	case SchemaPodIntent:
		root = g.podIntent()
	case SchemaSyncResult:
		root = g.output(reflect.TypeFor[SyncResult](), KindSyncResult)
	case SchemaLifecycleEvent:
		root = g.output(reflect.TypeFor[LifecycleEvent](), KindLifecycleEvent)
	case SchemaPodStatus:
		root = g.output(reflect.TypeFor[PodStatus](), "")
	case SchemaNodeRecord:
		root = g.output(reflect.TypeFor[NodeRecord](), KindNode)
	default:
		panic("no schema " + name)
	}
	g.prune(root)
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = SchemaIDBase + name + ".schema.json"
	root["title"] = "jetlet " + name
	if len(g.defs) > 0 {
		defs := obj{}
		for k, v := range g.defs {
			defs[k] = v
		}
		root["$defs"] = defs
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

type schemaGen struct {
	defs  map[string]obj
	names map[reflect.Type]string
	root  obj
}

// defNames renames the unexported wire types in the schema.
var defNames = map[reflect.Type]string{
	reflect.TypeFor[wirePod]():       "Pod",
	reflect.TypeFor[wireDeletePod](): "DeletePod",
}

// leafSchema is the schema of the Go types with their own UnmarshalJSON, or
// otherwise not plain structs: what they accept.
func leafSchema(t reflect.Type) (obj, bool) {
	switch t {
	case reflect.TypeFor[json.RawMessage](), reflect.TypeFor[metav1.FieldsV1]():
		return obj{}, true
	case reflect.TypeFor[resource.Quantity]():
		return quantitySchema(false), true
	case reflect.TypeFor[intstr.IntOrString]():
		return obj{"anyOf": []any{obj{"type": "string"}, intSchema(32)}}, true
	case reflect.TypeFor[metav1.Time](), reflect.TypeFor[metav1.MicroTime]():
		return obj{"type": []any{"string", "null"}, "format": "date-time"}, true
	case reflect.TypeFor[metav1.Duration]():
		return obj{"type": "string"}, true
	case reflect.TypeFor[time.Time]():
		return obj{"type": "string", "format": "date-time"}, true
	}
	return nil, false
}

const quantityPattern = `^[+-]?[0-9.]+([eEinumkKMGTP]*[-+]?[0-9]*)$`

func quantitySchema(nonNegative bool) obj {
	if nonNegative {
		return obj{"anyOf": []any{
			obj{"type": "string", "pattern": `^\+?[0-9.]+([eEinumkKMGTP]*[-+]?[0-9]*)$`},
			obj{"type": "number", "minimum": 0},
		}}
	}
	return obj{"anyOf": []any{obj{"type": "string", "pattern": quantityPattern}, obj{"type": "number"}}}
}

func intSchema(bits int) obj {
	return obj{
		"type":    "integer",
		"minimum": json.Number(strconv.FormatInt(math.MinInt64>>(64-bits), 10)),
		"maximum": json.Number(strconv.FormatInt(math.MaxInt64>>(64-bits), 10)),
	}
}

func enumOf[T ~string](vals ...T) obj {
	out := make([]any, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return obj{"enum": out}
}

// typeOverlays add keywords to every use of a type.
var typeOverlays = map[reflect.Type]obj{
	reflect.TypeFor[corev1.RestartPolicy]():            enumOf("", corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever),
	reflect.TypeFor[corev1.DNSPolicy]():                enumOf("", corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault, corev1.DNSNone),
	reflect.TypeFor[corev1.PullPolicy]():               enumOf("", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever),
	reflect.TypeFor[corev1.TerminationMessagePolicy](): enumOf("", corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError),
	reflect.TypeFor[corev1.Protocol]():                 enumOf("", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP),
	reflect.TypeFor[corev1.URIScheme]():                enumOf("", corev1.URISchemeHTTP, corev1.URISchemeHTTPS),
	reflect.TypeFor[corev1.MountPropagationMode]():     enumOf(corev1.MountPropagationNone, corev1.MountPropagationHostToContainer, corev1.MountPropagationBidirectional),
	reflect.TypeFor[corev1.RecursiveReadOnlyMode]():    enumOf(corev1.RecursiveReadOnlyDisabled, corev1.RecursiveReadOnlyIfPossible, corev1.RecursiveReadOnlyEnabled),
	reflect.TypeFor[corev1.HostPathType](): enumOf(corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
		corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev),
	reflect.TypeFor[corev1.StorageMedium]():               enumOf(corev1.StorageMediumDefault, corev1.StorageMediumMemory),
	reflect.TypeFor[corev1.ResourceResizeRestartPolicy](): enumOf(corev1.NotRequired, corev1.RestartContainer),
	reflect.TypeFor[corev1.Signal]():                      {"pattern": "^SIG"},
	reflect.TypeFor[corev1.ResourceList](): {
		"propertyNames":        obj{"pattern": resourceNamePattern},
		"additionalProperties": quantitySchema(true),
	},
	reflect.TypeFor[Op]():             enumOf(OpApply, OpDelete),
	reflect.TypeFor[Outcome]():        enumOf(OutcomeSynced, OutcomeFailed, OutcomeRejected, OutcomeSuperseded, OutcomeStale),
	reflect.TypeFor[EventType]():      enumOf(EventTypes...),
	reflect.TypeFor[PodPhase]():       enumOf(PhasePending, PhaseRunning, PhaseSucceeded, PhaseFailed, PhaseTerminating, PhaseTerminated),
	reflect.TypeFor[SandboxState]():   enumOf(SandboxReady, SandboxNotReady),
	reflect.TypeFor[ContainerState](): enumOf(ContainerCreated, ContainerRunning, ContainerExited, ContainerUnknown, ContainerWaiting),
	reflect.TypeFor[IsolationLevel](): enumOf(IsolationFull, IsolationPartial, IsolationNone),
}

// of returns the schema of a value of type t: a $ref for structs.
func (g *schemaGen) of(t reflect.Type) obj {
	if s, ok := leafSchema(t); ok {
		return s
	}
	var s obj
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(g.of(t.Elem()))
	case reflect.Interface:
		return obj{}
	case reflect.Struct:
		name := g.defFor(t)
		return obj{"$ref": "#/$defs/" + name}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			s = obj{"type": "string", "contentEncoding": "base64"}
		} else {
			s = obj{"type": "array", "items": g.of(t.Elem())}
		}
	case reflect.Map:
		s = obj{"type": "object", "additionalProperties": g.of(t.Elem())}
	case reflect.String:
		s = obj{"type": "string"}
	case reflect.Bool:
		s = obj{"type": "boolean"}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		s = intSchema(t.Bits())
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		s = obj{"type": "integer", "minimum": 0, "maximum": json.Number(strconv.FormatUint(math.MaxUint64>>(64-t.Bits()), 10))}
	case reflect.Float32, reflect.Float64:
		s = obj{"type": "number"}
	default:
		panic("no schema for " + t.String())
	}
	maps.Copy(s, typeOverlays[t])
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		s = nullable(s)
	}
	return s
}

// nullable lets s also be null, as encoding/json accepts for pointers,
// slices and maps.
func nullable(s obj) obj {
	if len(s) == 0 {
		return s
	}
	switch typ := s["type"].(type) {
	case string:
		s["type"] = []any{typ, "null"}
	case []any:
		if !slices.Contains(typ, "null") {
			s["type"] = append(typ, "null")
		}
	default:
		return obj{"anyOf": []any{s, obj{"type": "null"}}}
	}
	if e, ok := s["enum"].([]any); ok {
		s["enum"] = append(e, nil)
	}
	return s
}

func (g *schemaGen) defFor(t reflect.Type) string {
	if name, ok := g.names[t]; ok {
		return name
	}
	name := defNames[t]
	if name == "" {
		name = t.Name()
	}
	if _, taken := g.defs[name]; taken {
		name = t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:] + "." + name
	}
	g.names[t] = name
	g.defs[name] = obj{} // placeholder against recursion
	g.defs[name] = g.structSchema(t)
	return name
}

// structSchema is the schema of a struct, fields promoted as encoding/json
// does. Fields of jetlet's own output types without omitempty are always
// written, so they are required.
func (g *schemaGen) structSchema(t reflect.Type) obj {
	props := obj{}
	var required []any
	own := t.PkgPath() == reflect.TypeFor[PodIntent]().PkgPath() && !strings.HasPrefix(t.Name(), "wire")
	for _, f := range jsonFields(t) {
		props[f.name] = g.of(f.typ)
		if own && !f.omitempty {
			required = append(required, f.name)
		}
	}
	s := obj{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	maps.Copy(s, typeOverlays[t])
	return s
}

// def returns a generated definition for in-place overlays.
func (g *schemaGen) def(name string) obj {
	if name == "" {
		return g.root
	}
	d, ok := g.defs[name]
	if !ok {
		panic("no definition " + name)
	}
	return d
}

// set merges keywords into property prop of definition def.
func (g *schemaGen) set(def, prop string, kv obj) {
	props := g.def(def)["properties"].(obj)
	p, ok := props[prop].(obj)
	if !ok {
		panic("no property " + def + "." + prop)
	}
	maps.Copy(p, kv)
}

// replace swaps the schema of property prop of definition def.
func (g *schemaGen) replace(def, prop string, s any) {
	props := g.def(def)["properties"].(obj)
	if _, ok := props[prop]; !ok {
		panic("no property " + def + "." + prop)
	}
	props[prop] = s
}

// forbid makes a pointer property acceptable only absent or null, and a list
// only absent, null or empty, as DecodeIntent refuses them when set.
func (g *schemaGen) forbid(def string, props ...string) {
	for _, prop := range props {
		p := g.def(def)["properties"].(obj)[prop].(obj)
		if p["type"] != nil && slices.Contains(p["type"].([]any), "array") {
			g.replace(def, prop, obj{"type": []any{"array", "null"}, "maxItems": 0})
		} else {
			g.replace(def, prop, obj{"type": "null"})
		}
	}
}

func (g *schemaGen) require(def string, props ...string) {
	var req []any
	for _, p := range props {
		req = append(req, p)
	}
	g.def(def)["required"] = req
}

// copyDef makes definition to a deep copy of from.
func (g *schemaGen) copyDef(from, to string) {
	var c obj
	b, _ := json.Marshal(g.def(from))
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&c); err != nil {
		panic(err)
	}
	g.defs[to] = c
}

func pattern(p string) obj { return obj{"type": "string", "pattern": p} }

// optional turns an anchored pattern into one that also accepts "".
func optional(p string) string {
	return "^(" + strings.TrimSuffix(strings.TrimPrefix(p, "^"), "$") + ")?$"
}

func exactlyOne(props ...string) []any {
	var out []any
	for _, p := range props {
		out = append(out, obj{"required": []any{p}})
	}
	return out
}

var portRefSchema = obj{"anyOf": []any{
	obj{"type": "integer", "minimum": 1, "maximum": 65535},
	obj{"allOf": []any{pattern(portNamePattern), obj{"maxLength": 15, "pattern": "[a-z]"}, obj{"not": obj{"pattern": "--"}}}},
}}

func (g *schemaGen) podIntent() obj {
	g.root = g.structSchema(reflect.TypeFor[wireIntent]())
	g.defFor(reflect.TypeFor[wirePod]())
	g.defFor(reflect.TypeFor[wireDeletePod]())
	root := g.root

	// The envelope.
	g.require("", "apiVersion", "kind", "pod")
	g.set("", "apiVersion", obj{"const": APIVersion})
	g.set("", "kind", obj{"const": KindPodIntent})
	g.set("", "op", obj{"enum": []any{"", string(OpApply), string(OpDelete)}})
	g.set("", "revision", obj{"minimum": 1})
	g.set("", "gracePeriodSeconds", obj{"minimum": 0})
	g.replace("", "pod", obj{"type": "object"})
	root["if"] = obj{"properties": obj{"op": obj{"const": string(OpDelete)}}, "required": []any{"op"}}
	root["then"] = obj{"properties": obj{"pod": obj{"$ref": "#/$defs/DeletePod"}}}
	root["else"] = obj{"properties": obj{"pod": obj{"$ref": "#/$defs/Pod"}}}

	for _, d := range []string{"Pod", "DeletePod"} {
		g.set(d, "apiVersion", obj{"enum": []any{"", "v1"}})
		g.set(d, "kind", obj{"enum": []any{"", "Pod"}})
	}
	g.require("Pod", "metadata", "spec")
	g.require("DeletePod", "metadata")
	g.replace("Pod", "spec", obj{"$ref": "#/$defs/PodSpec"})

	g.require("ObjectMeta", "name", "namespace", "uid")
	g.set("ObjectMeta", "name", obj{"pattern": dnsSubdomainPattern, "maxLength": 253})
	g.set("ObjectMeta", "namespace", obj{"pattern": dnsLabelPattern, "maxLength": 63})
	g.set("ObjectMeta", "uid", obj{"pattern": uidPattern})
	g.set("ObjectMeta", "labels", obj{
		"propertyNames":        obj{"pattern": qualifiedNamePattern},
		"additionalProperties": obj{"type": "string", "pattern": labelValuePattern},
	})
	g.set("ObjectMeta", "annotations", obj{"propertyNames": obj{"pattern": qualifiedNamePattern}})

	// PodSpec.
	ps := g.def("PodSpec")
	g.require("PodSpec", "containers")
	g.set("PodSpec", "containers", obj{"minItems": 1})
	g.forbid("PodSpec", "ephemeralContainers", "resourceClaims", "imagePullSecrets",
		"runtimeClassName", "overhead", "readinessGates")
	g.forbid("PodSecurityContext", "windowsOptions", "seLinuxChangePolicy")
	g.forbid("SecurityContext", "windowsOptions")
	g.set("SecurityContext", "procMount", obj{"enum": []any{string(corev1.DefaultProcMount), string(corev1.UnmaskedProcMount), nil}})
	g.set("PodSpec", "terminationGracePeriodSeconds", obj{"minimum": 0})
	g.set("PodSpec", "activeDeadlineSeconds", obj{"minimum": 1})
	g.set("PodSpec", "hostname", obj{"pattern": optional(dnsLabelPattern), "maxLength": 63})
	g.set("PodSpec", "subdomain", obj{"pattern": optional(dnsLabelPattern), "maxLength": 63})
	g.set("PodDNSConfig", "nameservers", obj{"maxItems": 3})
	g.set("PodDNSConfig", "searches", obj{"maxItems": 32})
	g.require("HostAlias", "ip")
	g.set("PodOS", "name", obj{"enum": []any{string(corev1.Linux)}})
	ps["allOf"] = []any{
		obj{"not": obj{
			"properties": obj{"shareProcessNamespace": obj{"const": true}, "hostPID": obj{"const": true}},
			"required":   []any{"shareProcessNamespace", "hostPID"},
		}},
	}

	// Volumes: hostPath and emptyDir only.
	var others []string
	for name := range g.def("Volume")["properties"].(obj) {
		if name != "name" && name != "hostPath" && name != "emptyDir" {
			others = append(others, name)
		}
	}
	slices.Sort(others)
	g.forbid("Volume", others...)
	g.require("Volume", "name")
	g.set("Volume", "name", obj{"pattern": dnsLabelPattern, "maxLength": 63})
	g.def("Volume")["not"] = obj{"required": []any{"hostPath", "emptyDir"}}
	g.require("HostPathVolumeSource", "path")
	g.set("HostPathVolumeSource", "path", obj{"pattern": "^/"})
	g.set("EmptyDirVolumeSource", "sizeLimit", nullable(quantitySchema(true)))
	g.set("EmptyDirVolumeSource", "mode", obj{"minimum": 0, "maximum": 0o1777})
	// A sizeLimit is the tmpfs's size: medium Memory only.
	g.def("EmptyDirVolumeSource")["if"] = obj{"not": obj{"properties": obj{"medium": obj{"const": string(corev1.StorageMediumMemory)}}, "required": []any{"medium"}}}
	g.def("EmptyDirVolumeSource")["then"] = obj{"properties": obj{"sizeLimit": obj{"type": "null"}}}

	// Containers.
	g.require("Container", "name", "image")
	g.set("Container", "name", obj{"pattern": dnsLabelPattern, "maxLength": 63})
	g.set("Container", "image", obj{"pattern": `^\S(.*\S)?$`})
	g.forbid("Container", "envFrom", "volumeDevices")
	g.set("Container", "livenessProbe", obj{"properties": obj{"successThreshold": obj{"maximum": 1}}})
	g.set("Container", "startupProbe", obj{"properties": obj{"successThreshold": obj{"maximum": 1}}})
	g.set("Container", "readinessProbe", obj{"properties": obj{"terminationGracePeriodSeconds": obj{"type": "null"}}})
	// A container's own restart policy and rules (the API server's limits);
	// rules need the policy, and are refused on init containers.
	g.replace("Container", "restartPolicy", obj{"enum": []any{
		string(corev1.ContainerRestartPolicyAlways), string(corev1.ContainerRestartPolicyOnFailure), string(corev1.ContainerRestartPolicyNever), nil,
	}})
	g.set("Container", "restartPolicyRules", obj{"maxItems": 20})
	g.def("Container")["dependentSchemas"] = obj{"restartPolicyRules": obj{
		"if":   obj{"properties": obj{"restartPolicyRules": obj{"type": "array", "minItems": 1}}},
		"then": obj{"required": []any{"restartPolicy"}},
	}}
	g.require("ContainerRestartRule", "action", "exitCodes")
	g.replace("ContainerRestartRule", "action", obj{"const": string(corev1.ContainerRestartRuleActionRestart)})
	g.replace("ContainerRestartRule", "exitCodes", obj{"$ref": "#/$defs/ContainerRestartRuleOnExitCodes"})
	g.require("ContainerRestartRuleOnExitCodes", "operator")
	g.replace("ContainerRestartRuleOnExitCodes", "operator", obj{"enum": []any{
		string(corev1.ContainerRestartRuleOnExitCodesOpIn), string(corev1.ContainerRestartRuleOnExitCodesOpNotIn),
	}})
	g.set("ContainerRestartRuleOnExitCodes", "values", obj{"maxItems": 255})
	g.copyDef("Container", "InitContainer")
	g.forbid("InitContainer", "restartPolicyRules")
	delete(g.def("InitContainer"), "dependentSchemas")
	// Not a sidecar (restartPolicy Always): no probes, no hooks.
	g.def("InitContainer")["if"] = obj{"not": obj{"properties": obj{"restartPolicy": obj{"const": string(corev1.ContainerRestartPolicyAlways)}}, "required": []any{"restartPolicy"}}}
	g.def("InitContainer")["then"] = obj{"properties": obj{
		"livenessProbe": obj{"type": "null"}, "readinessProbe": obj{"type": "null"},
		"startupProbe": obj{"type": "null"}, "lifecycle": obj{"type": "null"},
	}}
	g.set("PodSpec", "initContainers", obj{"items": obj{"$ref": "#/$defs/InitContainer"}})

	g.require("ContainerPort", "containerPort")
	g.set("ContainerPort", "containerPort", obj{"minimum": 1, "maximum": 65535})
	g.set("ContainerPort", "hostPort", obj{"minimum": 0, "maximum": 65535})
	g.set("ContainerPort", "name", obj{"allOf": []any{
		pattern(optional(portNamePattern)), obj{"maxLength": 15, "pattern": "^$|[a-z]"}, obj{"not": obj{"pattern": "--"}},
	}})

	g.require("EnvVar", "name")
	g.set("EnvVar", "name", obj{"pattern": envNamePattern})
	g.def("EnvVar")["not"] = obj{
		"required":   []any{"value", "valueFrom"},
		"properties": obj{"value": obj{"minLength": 1}, "valueFrom": obj{"type": "object"}},
	}
	g.forbid("EnvVarSource", "configMapKeyRef", "secretKeyRef", "fileKeyRef")
	g.def("EnvVarSource")["oneOf"] = exactlyOne("fieldRef", "resourceFieldRef")
	g.require("ObjectFieldSelector", "fieldPath")
	g.set("ObjectFieldSelector", "fieldPath", obj{"pattern": fieldPathPattern})
	g.set("ObjectFieldSelector", "apiVersion", obj{"enum": []any{"", "v1"}})
	g.require("ResourceFieldSelector", "resource")
	g.set("ResourceFieldSelector", "resource", obj{"pattern": resourceRefPattern})

	g.forbid("ResourceRequirements", "claims")
	g.set("ResourceRequirements", "limits", obj{"properties": obj{string(corev1.ResourceEphemeralStorage): false}})
	// Pod-level resources: cpu, memory and huge pages (the API server's
	// IsSupportedPodLevelResource), no claims.
	podLevel := obj{"type": []any{"object", "null"}, "propertyNames": obj{"pattern": podResourceNamePattern}, "additionalProperties": quantitySchema(true)}
	g.replace("PodSpec", "resources", obj{"anyOf": []any{obj{"type": "null"}, obj{
		"type": "object", "additionalProperties": false,
		"properties": obj{"limits": podLevel, "requests": podLevel, "claims": obj{"type": []any{"array", "null"}, "maxItems": 0}},
	}}})
	g.set("ContainerResizePolicy", "resourceName", obj{"enum": []any{string(corev1.ResourceCPU), string(corev1.ResourceMemory)}})

	g.require("VolumeMount", "name", "mountPath")
	g.set("VolumeMount", "mountPath", obj{"pattern": "^/"})
	relative := obj{"pattern": `^([^/].*)?$`, "not": obj{"pattern": `(^|/)\.\.(/|$)`}}
	g.set("VolumeMount", "subPath", relative)
	g.set("VolumeMount", "subPathExpr", maps.Clone(relative))
	g.forbid("VolumeMount", "bindMountOptions")
	g.def("VolumeMount")["allOf"] = []any{
		obj{"not": obj{
			"required":   []any{"subPath", "subPathExpr"},
			"properties": obj{"subPath": obj{"minLength": 1}, "subPathExpr": obj{"minLength": 1}},
		}},
		obj{
			"if": obj{
				"properties": obj{"recursiveReadOnly": obj{"enum": []any{string(corev1.RecursiveReadOnlyIfPossible), string(corev1.RecursiveReadOnlyEnabled)}}},
				"required":   []any{"recursiveReadOnly"},
			},
			"then": obj{
				"required": []any{"readOnly"},
				"properties": obj{
					"readOnly":         obj{"const": true},
					"mountPropagation": obj{"enum": []any{string(corev1.MountPropagationNone), nil}},
				},
			},
		},
	}

	// Probes and handlers.
	probe := g.def("Probe")
	probe["oneOf"] = exactlyOne("exec", "httpGet", "tcpSocket", "grpc")
	for _, f := range []string{"initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"} {
		g.set("Probe", f, obj{"minimum": 0})
	}
	g.set("Probe", "terminationGracePeriodSeconds", obj{"minimum": 1})
	g.forbid("LifecycleHandler", "tcpSocket")
	g.def("LifecycleHandler")["oneOf"] = exactlyOne("exec", "httpGet", "sleep")
	g.require("SleepAction", "seconds")
	g.set("SleepAction", "seconds", obj{"minimum": 0})
	g.require("ExecAction", "command")
	g.set("ExecAction", "command", obj{"minItems": 1})
	g.require("HTTPGetAction", "port")
	g.replace("HTTPGetAction", "port", portRefSchema)
	g.require("TCPSocketAction", "port")
	g.replace("TCPSocketAction", "port", portRefSchema)
	g.set("HTTPGetAction", "protocol", obj{"enum": []any{string(corev1.HTTPProtocolHTTP1), nil}})
	g.set("GRPCAction", "mode", obj{"enum": []any{string(corev1.GRPCProbeModePlaintext), nil}})
	g.require("GRPCAction", "port")
	g.set("GRPCAction", "port", obj{"minimum": 1, "maximum": 65535})
	return root
}

// output is the schema of one of jetlet's own messages.
func (g *schemaGen) output(t reflect.Type, kind string) obj {
	g.root = g.structSchema(t)
	props := g.root["properties"].(obj)
	if _, ok := props["apiVersion"]; ok {
		g.set("", "apiVersion", obj{"const": APIVersion})
	}
	if kind != "" {
		g.set("", "kind", obj{"const": kind})
	}
	if _, ok := props["node"]; ok {
		g.set("", "node", obj{"pattern": nodeNamePattern, "maxLength": 63})
	}
	if _, ok := props["uid"]; ok {
		g.set("", "uid", obj{"pattern": uidPattern})
	}
	if _, ok := g.defs["PodStatus"]; ok {
		g.set("PodStatus", "node", obj{"pattern": nodeNamePattern, "maxLength": 63})
		g.set("PodStatus", "uid", obj{"pattern": uidPattern})
	}
	if kind == KindNode {
		// A node's resources count its pods too.
		for _, prop := range []string{"capacity", "allocatable", "allocated"} {
			g.set("", prop, obj{"propertyNames": obj{"pattern": nodeResourceNamePattern}})
		}
		g.set("NodeCondition", "type", enumOf(corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable))
		g.set("NodeCondition", "status", enumOf(corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown))
	}
	if _, ok := g.defs["PodCounts"]; ok {
		g.set("PodCounts", "byPhase", obj{"propertyNames": typeOverlays[reflect.TypeFor[PodPhase]()]})
	}
	return g.root
}

// prune drops the definitions nothing refers to (the forbidden volume
// sources, for instance).
func (g *schemaGen) prune(root obj) {
	used := map[string]bool{}
	var visit func(v any)
	visit = func(v any) {
		switch v := v.(type) {
		case obj:
			for k, x := range v {
				if s, ok := x.(string); k == "$ref" && ok {
					name := strings.TrimPrefix(s, "#/$defs/")
					if !used[name] {
						used[name] = true
						visit(g.defs[name])
					}
					continue
				}
				visit(x)
			}
		case []any:
			for _, x := range v {
				visit(x)
			}
		}
	}
	visit(root)
	for name := range g.defs {
		if !used[name] {
			delete(g.defs, name)
		}
	}
}
