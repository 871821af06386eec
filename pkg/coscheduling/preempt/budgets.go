package preempt

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

// PodDisruptionBudgets bound preemption: the engine counts, per budget, the
// disruptions a decision would cause (see pkg/preemption's doc.go).

// addBudgets adds the PodDisruptionBudgets that cover candidate pods, in
// namespace and name order, and marks each pod with the budgets it falls
// under. A budget with a null selector covers no pod; an empty one covers
// its whole namespace, as policy/v1 defines.
func (pr *Preempter) addBudgets(req *preemption.Request, cands *candidates) {
	if pr.cfg.PDBs == nil {
		return
	}
	type ref struct{ u, i int }
	byNS := map[string][]ref{}
	for u, pods := range cands.pods {
		for i, q := range pods {
			byNS[q.Namespace] = append(byNS[q.Namespace], ref{u, i})
		}
	}
	namespaces := make([]string, 0, len(byNS))
	for ns := range byNS {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		pdbs, err := pr.cfg.PDBs.PodDisruptionBudgets(ns).List(labels.Everything())
		if err != nil || len(pdbs) == 0 {
			continue
		}
		sort.Slice(pdbs, func(i, j int) bool { return pdbs[i].Name < pdbs[j].Name })
		for _, pdb := range pdbs {
			if pdb.Spec.Selector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil {
				continue // the API server validates selectors; nothing to honour
			}
			b := -1
			for _, r := range byNS[ns] {
				if !sel.Matches(labels.Set(cands.pods[r.u][r.i].Labels)) {
					continue
				}
				if b < 0 {
					b = len(req.PDBs)
					req.PDBs = append(req.PDBs, preemption.PDB{Name: ns + "/" + pdb.Name, Allowed: int(max(0, pdb.Status.DisruptionsAllowed))})
				}
				pod := &req.Units[r.u].Pods[r.i]
				pod.PDBs = append(pod.PDBs, b)
			}
		}
	}
}
