// Package capacity holds gpu-gang's quantity type: what a pod takes from a
// node and what a node has left, resource by resource. It knows nothing of
// the scheduling framework: the plugin reads a NodeInfo into Amounts, and the
// ledger and the planner's callers compute with them.
package capacity

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Amounts maps a resource to a quantity in the scheduler's units: millicores
// for cpu, plain values otherwise. v1.ResourcePods counts pod slots.
type Amounts map[v1.ResourceName]int64

// PodAmounts is what a pod takes from a node: its effective requests (init
// containers and overhead included, as NodeResourcesFit counts them) plus one
// pod slot.
func PodAmounts(pod *v1.Pod) Amounts {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	a := Amounts{v1.ResourcePods: 1}
	for name, q := range reqs {
		if name == v1.ResourceCPU {
			a[name] = q.MilliValue()
		} else if !q.IsZero() {
			a[name] = q.Value()
		}
	}
	return a
}

// Add adds o to a, resource by resource.
func (a Amounts) Add(o Amounts) {
	for name, q := range o {
		a[name] += q
	}
}

// FitsIn reports whether a asks for no more of anything than room has: a
// member with request a can take a planned place that holds room. It is
// placement.QuantityFits per resource, the rule the planners count by.
func (a Amounts) FitsIn(room Amounts) bool {
	for name, q := range a {
		if !placement.QuantityFits(q, room[name]) {
			return false
		}
	}
	return true
}

// Names returns a's resources in name order, so that what is built from
// them is deterministic.
func (a Amounts) Names() []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(a))
	for name := range a {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// Describe renders a in name order, skipping pod slots and zeros, in the
// units people read: "cpu=3 nvidia.com/gpu=24".
func (a Amounts) Describe() string {
	var b strings.Builder
	for _, name := range a.Names() {
		if name == v1.ResourcePods || a[name] == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s", name, placement.FormatQuantity(string(name), a[name]))
	}
	if b.Len() == 0 {
		return "nothing"
	}
	return b.String()
}
