package preemption

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// validate checks a Request for what the engine relies on. Each error names
// the offending unit, pod or budget and what is wrong with it.
func validate(req *Request) error {
	dims := len(req.Resources)
	var errs []error
	if len(req.Members) == 0 {
		errs = append(errs, fmt.Errorf("preemptor %s has no members to place", req.Gang))
	}
	switch req.PreemptionPolicy {
	case "", v1.PreemptLowerPriority, v1.PreemptNever:
	default:
		errs = append(errs, fmt.Errorf("preemptor %s: unknown preemptionPolicy %q; want %s or %s",
			req.Gang, req.PreemptionPolicy, v1.PreemptLowerPriority, v1.PreemptNever))
	}
	if req.Now.IsZero() {
		errs = append(errs, errors.New("request.Now is not set; work lost is measured from it"))
	}
	for i := range req.Nodes {
		if len(req.Nodes[i].Free) != dims {
			errs = append(errs, fmt.Errorf("node %s: free vector has %d dimensions, want %d", req.Nodes[i].Name, len(req.Nodes[i].Free), dims))
		}
	}
	for i := range req.Members {
		m := &req.Members[i]
		if len(m.Request) != dims {
			errs = append(errs, fmt.Errorf("member %s: request vector has %d dimensions, want %d", m.Name, len(m.Request), dims))
		}
		if m.Eligible != nil && len(m.Eligible) != len(req.Nodes) {
			errs = append(errs, fmt.Errorf("member %s: eligibility covers %d nodes, want %d", m.Name, len(m.Eligible), len(req.Nodes)))
		}
		if m.MaxPerNode < 0 {
			errs = append(errs, fmt.Errorf("member %s: MaxPerNode is %d, want 0 (no cap) or more", m.Name, m.MaxPerNode))
		}
	}
	for _, a := range req.Anchors {
		if a < 0 || a >= len(req.Nodes) {
			errs = append(errs, fmt.Errorf("anchor %d is not a node index (the request has %d nodes)", a, len(req.Nodes)))
		}
	}
	for b, pdb := range req.PDBs {
		if pdb.Allowed < 0 {
			errs = append(errs, fmt.Errorf("PDB %s (index %d): disruptions allowed is %d; pass 0 for a budget that allows none", pdb.Name, b, pdb.Allowed))
		}
	}
	names := make(map[string]int, len(req.Units))
	for u := range req.Units {
		errs = append(errs, validateUnit(req, u, names)...)
	}
	return errors.Join(errs...)
}

func validateUnit(req *Request, u int, names map[string]int) []error {
	un := &req.Units[u]
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("unit %d (%s %s): %s", u, un.Kind, un.Name, fmt.Sprintf(format, args...)))
	}
	switch {
	case un.Name == "":
		bad("name is empty")
	default:
		if v, dup := names[un.Name]; dup {
			bad("name is also unit %d's; unit names must be unique", v)
		}
		names[un.Name] = u
	}
	switch un.Kind {
	case KindGang:
		if len(un.Pods) == 0 {
			bad("has no pods")
		}
		if un.Surplus < 0 || un.Surplus > 0 && un.Surplus >= len(un.Pods) {
			bad("surplus %d must be at least 0 and below its %d pods (minMember is at least 1)", un.Surplus, len(un.Pods))
		}
	case KindPod:
		if len(un.Pods) != 1 {
			bad("a plain pod unit holds exactly one pod, not %d", len(un.Pods))
		}
		if un.Surplus != 0 {
			bad("a plain pod has no surplus members, got %d", un.Surplus)
		}
	default:
		bad("unknown kind")
	}
	for i := range un.Pods {
		pd := &un.Pods[i]
		if pd.Node < -1 || pd.Node >= len(req.Nodes) {
			bad("pod %s: node index %d is outside the %d nodes (-1 for a node outside them)", pd.Name, pd.Node, len(req.Nodes))
		}
		if len(pd.Request) != len(req.Resources) {
			bad("pod %s: request vector has %d dimensions, want %d", pd.Name, len(pd.Request), len(req.Resources))
		}
		if pd.GPUs < 0 {
			bad("pod %s: negative GPUs %d", pd.Name, pd.GPUs)
		}
		for _, b := range pd.PDBs {
			if b < 0 || b >= len(req.PDBs) {
				bad("pod %s: PDB index %d is outside the %d budgets", pd.Name, b, len(req.PDBs))
			}
		}
	}
	return errs
}
