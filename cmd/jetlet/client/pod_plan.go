package client

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// dryRunNode is the --dry-run value that asks the pod's node for its plan.
const dryRunNode = "node"

// printPlan shows a node's plan as Terraform and Nomad show theirs: + start,
// - kill, -/+ restart, ~ unchanged, with kubelet's reasons.
func printPlan(w io.Writer, pi *plannedIntent, plan schemas.PodPlan) {
	fmt.Fprintf(w, "%s on node %s (uid %s", pi.label, pi.Node, pi.UID)
	if pi.Unchanged {
		fmt.Fprintf(w, ", unchanged: nothing would be published")
	}
	fmt.Fprintln(w, "):")
	if len(plan.MissingFeatures) > 0 {
		fmt.Fprintf(w, "  ! needs declared features the node lacks: %s\n", strings.Join(plan.MissingFeatures, ", "))
	}
	switch {
	case plan.Rejected != "":
		fmt.Fprintf(w, "  ! Rejected: %s\n", plan.Rejected)
		return
	case plan.Admission != nil && !plan.Admission.Admit:
		fmt.Fprintf(w, "  ! refused at admission: %s: %s\n", plan.Admission.Reason, plan.Admission.Message)
		return
	case plan.Admission != nil:
		fmt.Fprintln(w, "  admission: fits")
	}
	if plan.Finished {
		fmt.Fprintln(w, "  the pod ran to its end: nothing restarts")
		return
	}
	if plan.Op == schemas.OpDelete && plan.Name == "" {
		fmt.Fprintln(w, "  the node does not run it: nothing to do")
		return
	}
	counts := map[schemas.PlanAction]int{}
	printStep(w, "sandbox", plan.Sandbox)
	for _, s := range plan.Containers {
		what := "container " + s.Name
		if s.Init {
			what = "init container " + s.Name
		}
		printStep(w, what, s)
		counts[s.Action]++
	}
	resized := ""
	if n := counts[schemas.PlanResize]; n > 0 {
		resized = fmt.Sprintf("%d to resize in place, ", n)
	}
	fmt.Fprintf(w, "Plan: %d to start, %d to restart, %s%d to kill, %d unchanged.\n",
		counts[schemas.PlanStart], counts[schemas.PlanRestart], resized, counts[schemas.PlanKill], counts[schemas.PlanKeep])
}

// planSymbols are the plan's marks, as Terraform's.
var planSymbols = map[schemas.PlanAction]string{
	schemas.PlanKeep: "  ~", schemas.PlanCreate: "  +", schemas.PlanRecreate: "-/+", schemas.PlanStart: "  +",
	schemas.PlanKill: "  -", schemas.PlanRestart: "-/+", schemas.PlanWait: "  .", schemas.PlanNone: "  .",
	schemas.PlanResize: "  ~",
}

func printStep(w io.Writer, what string, s schemas.PlanStep) {
	var why []string
	if s.Reason != "" {
		why = append(why, s.Reason)
	}
	if len(s.Fields) > 0 {
		why = append(why, "changed: "+strings.Join(s.Fields, ", "))
	}
	if s.BackOffUntil != nil {
		why = append(why, "back-off until "+s.BackOffUntil.Local().Format(time.RFC3339))
	} else if s.Message != "" {
		why = append(why, s.Message)
	}
	line := fmt.Sprintf("%s %s: %s", planSymbols[s.Action], what, s.Action)
	if len(why) > 0 {
		line += " (" + strings.Join(why, "; ") + ")"
	}
	fmt.Fprintln(w, line)
}

// showPlans asks each intent's node for its plan and prints them (as JSON
// lines with -o json).
func showPlans(ctx context.Context, w io.Writer, c *jc.Client, plans []*plannedIntent, output string) error {
	for _, pi := range plans {
		plan, err := c.Plan(ctx, pi.Intent)
		if err != nil {
			return err
		}
		if output == outputJSON {
			if err := printJSONLine(w, plan); err != nil {
				return err
			}
			continue
		}
		printPlan(w, pi, plan)
	}
	return nil
}
