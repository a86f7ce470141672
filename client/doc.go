// Package client is the Go client of a jetlet fleet, for the programs
// upstream of its nodes: schedulers that publish intents, auditors that
// follow lifecycle events, operators that move pods between nodes. It
// speaks jetlet's wire (docs/wire-protocol.md) so that they need not: the
// `jetlet` command line's client commands are a layer of flags and printing
// over it.
//
// # Connecting
//
// Connect takes Options: the server's URL (or a cluster's), and
// credentials: a creds file, an nkey seed, a user and password or a token,
// TLS, or by default the seed that `jetlet run` wrote in its data dir. A
// client of a NATS that gives each user its own inbox sets InboxPrefix.
// Every call that reads, or publishes with a message id, rides out a
// cluster that loses a server or elects a leader: it tries again until its
// context ends.
//
//	c, err := client.Connect(ctx, client.Options{URL: "nats://n1:4222", NKeyFile: "scheduler.nk"})
//	if err != nil { ... }
//	defer c.Close()
//
// # Intents
//
// A scheduler places a pod with Apply: the client picks its uid (the live
// pod's of that name on the node, else a new one) and its next revision,
// validates the intent as the node will, and publishes it to the node's
// intents stream (its partition, when partitioned) with a Nats-Msg-Id, so
// that a retried publish is stored once. Wait returns the node's
// SyncResult; a refusal at admission (a node out of memory, cordoned, ...)
// is a *RejectedError carrying the result's reason:
//
//	in, err := c.Apply(ctx, "n1", pod)
//	res, err := c.Wait(ctx, in, client.WaitOptions{})
//	var rej *client.RejectedError
//	if errors.As(err, &rej) && strings.HasPrefix(rej.Reason(), "OutOf") {
//		// place it elsewhere
//	}
//
// A pod applied again unchanged is not published again (Intent.Unchanged).
// Delete publishes a pod's delete intent, with a grace period. A Planner
// plans a batch of PodIntents as written (kept generic, so that the node
// judges every field), chaining a pod named twice; Publish stores an Intent
// made so or otherwise (NewIntent, ApplyIntent, DeleteIntent); Plan asks
// the node what it would do with one, publishing nothing.
//
// # Reads
//
// Pods, FindPods and GetPod read what the fleet says of its pods: each
// pod's status (jetlet_status) and newest intent. Statuses and
// WatchStatuses read the statuses alone; Intents the intents kept. PodsAt
// and PodThen tell the pods at a past moment from the results stream;
// History sets each intent beside its result, and HistoryDiffs says what
// each apply changed.
//
// # Nodes
//
// Nodes lists the nodes' records (capacity, allocatable, allocated,
// labels, taints, conditions, heartbeat) with their liveness, and
// WatchNodes follows them: a scheduler keeps its view of the fleet with it
// and filters with Node.Admits, the node's own admission checks run on its
// record (selector, affinity, taints, what is left of its allocatable).
// Cordon asks a node to refuse new pods; Drain moves a live node's pods to
// another, Replay re-creates a lost node's there, each pod once however
// often they are run.
//
// # Events
//
// Events hands over lifecycle events in stream order, from a stored
// position (EventsOptions.After, an Event's Seq), from a time, or from the
// start, and with Follow goes on as they come. An auditor that stores the
// Seq of each event it has handled, and resumes from it, sees every event
// exactly once across its own restarts. Event.CloudEvent is an event as a
// CloudEvent.
//
// # Logs, exec, configuration, images
//
// Logs and Exec ask a pod's node over its node service. PrepareConfigMap,
// PrepareSecret (sealed for each node with its record's key; SealSecret
// for a key the caller has) and StoreConfigs store what pods mount; PushImage stores an image in the
// fleet's object store, where every node's registry finds it.
//
// # Errors
//
// Failures match the sentinels with errors.Is: ErrNotFound (a pod, node,
// stream or bucket that does not exist), ErrRejected (*RejectedError, with
// the result), ErrDenied (*DeniedError, with the permission NATS refused),
// ErrInvalid (an argument or intent that fails validation, nothing sent),
// ErrExecTimedOut (Exec's command outlived its timeout). Their messages name the `jetlet` command line's flags where those say
// what to change.
package client
