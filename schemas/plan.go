package schemas

import "time"

// PodPlan is a node's verdict on an intent before it acts (docs/contract.md
// section 14, `jetlet apply --dry-run=node`): what validation and admission
// say, and what its next sync would do to the pod as it runs now. Asking
// for it changes nothing on the node and stores nothing.
type PodPlan struct {
	Node      string `json:"node"`
	UID       string `json:"uid"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Op        Op     `json:"op"`
	// Rejected is the error the intent would be Rejected with; nothing
	// else is planned then.
	Rejected string `json:"rejected,omitempty"`
	// MissingFeatures are the declared features (NodeRecord.declaredFeatures)
	// the pod needs, to be placed or for this update, that the node does not
	// declare, as a scheduler's NodeDeclaredFeatures filter infers them.
	MissingFeatures []string `json:"missingFeatures,omitempty"`
	// Admission is admission's verdict on a pod the node does not run yet;
	// nil for a pod admitted already (admission is not asked again).
	Admission *PlanAdmission `json:"admission,omitempty"`
	// Finished: the pod ran to its end and its sandbox is gone; nothing
	// restarts (kubelet's terminal pods).
	Finished bool `json:"finished,omitempty"`
	// Sandbox is the pod sandbox's step; Containers the init containers'
	// steps (in spec order), then the app containers'.
	Sandbox    PlanStep   `json:"sandbox"`
	Containers []PlanStep `json:"containers"`
}

// PlanAdmission is admission's verdict in a plan.
type PlanAdmission struct {
	Admit   bool   `json:"admit"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// PlanAction is what a sync does to the sandbox or to one container.
type PlanAction string

// The actions of a plan, shown as Terraform and Nomad show theirs: + start,
// - kill, -/+ restart, ~ keep.
const (
	PlanKeep     PlanAction = "keep"     // running, left as it is
	PlanCreate   PlanAction = "create"   // the sandbox: created
	PlanRecreate PlanAction = "recreate" // the sandbox: stopped and created anew, every container with it
	PlanStart    PlanAction = "start"    // started (again)
	PlanKill     PlanAction = "kill"     // stopped, not started again
	PlanRestart  PlanAction = "restart"  // stopped, then started anew
	PlanWait     PlanAction = "wait"     // not started yet: the init containers come first
	PlanNone     PlanAction = "none"     // exited and stays so (its restart policy), or never ran
	PlanResize   PlanAction = "resize"   // running, its resources changed in place
)

// PlanStep is one step of a plan.
type PlanStep struct {
	Name   string     `json:"name,omitempty"`
	Init   bool       `json:"init,omitempty"`
	Action PlanAction `json:"action"`
	// Reason is kubelet's word for a kill (SpecChanged, LivenessProbe,
	// StartupProbe, Unknown) or a wait (CrashLoopBackOff); Message says
	// more.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Fields are the container's spec fields that changed, for a restart
	// of reason SpecChanged.
	Fields []string `json:"fields,omitempty"`
	// BackOffUntil: a start the crash-loop back-off holds until then; the
	// sync that comes before only says CrashLoopBackOff.
	BackOffUntil *time.Time `json:"backOffUntil,omitempty"`
}
