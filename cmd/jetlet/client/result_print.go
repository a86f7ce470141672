package client

import (
	"fmt"
	"io"

	"github.com/jetlet/jetlet/schemas"
)

// printResult writes a SyncResult for a person: a headline with the outcome,
// the error, and the actions as a table.
//
//	pod/default/web: Synced (node n1, uid 6f1c..., revision 3, intent 42, 12ms)
//	ACTION             TARGET   ERROR    MESSAGE
//	CreatePodSandbox   6f1c...  <none>   <none>
func printResult(w io.Writer, label string, r *schemas.SyncResult) {
	took := ""
	if !r.ReceivedAt.IsZero() && !r.FinishedAt.IsZero() {
		took = ", " + r.FinishedAt.Sub(r.ReceivedAt).Round(1e6).String()
	}
	fmt.Fprintf(w, "%s: %s (node %s, uid %s, revision %d, intent %d%s)\n", label, r.Outcome, r.Node, r.UID, r.Revision, r.IntentSeq, took)
	if r.Error != "" {
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
	if r.Status != nil && r.Outcome == schemas.OutcomeSynced {
		fmt.Fprintf(w, "phase: %s\n", r.Status.Phase)
	}
	if len(r.Actions) == 0 {
		if r.Outcome == schemas.OutcomeSynced {
			fmt.Fprintln(w, "nothing to do")
		}
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ACTION\tTARGET\tERROR\tMESSAGE")
	for _, a := range r.Actions {
		writeRow(tw, a.Action, a.Target, a.Error, a.Message)
	}
	tw.Flush()
}
