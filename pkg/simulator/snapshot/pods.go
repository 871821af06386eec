package snapshot

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
)

// readNodes keeps the nodes with GPUs.
func (s *Snapshot) readNodes(nodes []*v1.Node, dra *replay) []error {
	var errs []error
	seen := map[string]bool{}
	var cpuOnly int
	other := unsimulated{}
	for _, n := range nodes {
		switch {
		case n.Name == "":
			errs = append(errs, errors.New("a Node has no metadata.name"))
			continue
		case seen[n.Name]:
			errs = append(errs, fmt.Errorf("Node %s is listed twice", n.Name))
			continue
		case n.Status.Allocatable == nil:
			errs = append(errs, fmt.Errorf("Node %s has no status.allocatable; take the snapshot with %s, which prints status", n.Name, Command))
			continue
		}
		seen[n.Name] = true
		labels := n.Labels
		if labels == nil {
			labels = map[string]string{}
		}
		gpus := n.Status.Allocatable.Name(fabric.GPU, "").Value()
		if gpus <= 0 {
			if devices, hw := dra.node(n.Name); devices > 0 {
				s.Nodes = append(s.Nodes, Node{Name: n.Name, Labels: labels, GPUs: devices, DRA: true, Hardware: hw})
				continue
			}
			if !other.add(n.Status.Allocatable) {
				cpuOnly++
			}
			continue
		}
		s.Nodes = append(s.Nodes, Node{Name: n.Name, Labels: labels, GPUs: int(gpus)})
	}
	if cpuOnly > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d nodes without accelerators", cpuOnly))
	}
	if other.count > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d nodes whose only accelerators are ones the simulator does not simulate (%s)", other.count, other.names()))
	}
	return errs
}

// pendingGang gathers a gang's pending members.
type pendingGang struct {
	spec *gang.Spec
	// gpu are the members that ask for GPUs; all are every pending member,
	// for the first in rank order.
	gpu []Pod
	all []*v1.Pod
}

// readPods sorts pods into bound, gang members and plain pending pods. It
// asks pkg/gang what the scheduler asks it: which gang a pod joins (gang.Of:
// the native PodGroup its spec.schedulingGroup names, else the one its
// scheduling.x-k8s.io/pod-group label names), whether a PodGroup can be
// honoured (Spec.Validate), and a gang's topology policy (gang.PolicyOf,
// with its first pending member in rank order). Accelerators are what
// fleet.IsAccelerator says; only nvidia.com/gpu is simulated.
func (s *Snapshot) readPods(pods []*v1.Pod, groups []*gang.Spec, dra *replay) []error {
	var errs []error
	gpuNodes := map[string]bool{}
	for _, n := range s.Nodes {
		gpuNodes[n.Name] = true
	}
	gangs := map[gang.Key]*pendingGang{}
	for _, g := range groups {
		if g.Key.Name == "" || g.Key.Namespace == "" {
			errs = append(errs, errors.New("a PodGroup has no metadata.name or metadata.namespace"))
			continue
		}
		if err := g.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("PodGroup %s: %w", g.Key, err))
			continue
		}
		gangs[g.Key] = &pendingGang{spec: g}
	}
	var cpuOnly, finished, dropped int
	other := unsimulated{}
	// leftOut counts a pod that asks for no GPU: under other (with the
	// accelerators it asks for) or as CPU-only.
	leftOut := func(p *v1.Pod, cpu *int) {
		if !other.add(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})) {
			(*cpu)++
		}
	}
	for _, p := range pods {
		if p.Name == "" || p.Namespace == "" {
			errs = append(errs, errors.New("a Pod has no metadata.name or metadata.namespace"))
			continue
		}
		key := p.Namespace + "/" + p.Name
		if len(p.Spec.Containers) == 0 {
			errs = append(errs, fmt.Errorf("Pod %s has no spec.containers; take the snapshot with %s", key, Command))
			continue
		}
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed || p.DeletionTimestamp != nil {
			finished++
			continue
		}
		gpus, claimed := fabric.GPUsOf(p), 0
		if p.Spec.NodeName != "" {
			gpus += dra.boundGPUs(p)
			if gpus == 0 {
				leftOut(p, &cpuOnly)
				continue
			}
			if !gpuNodes[p.Spec.NodeName] {
				errs = append(errs, fmt.Errorf("Pod %s runs on node %s, which the snapshot does not hold with %s; take nodes and pods in one snapshot: %s",
					key, p.Spec.NodeName, fabric.GPU, Command))
				continue
			}
			s.Bound = append(s.Bound, BoundPod{Namespace: p.Namespace, Name: p.Name, Node: p.Spec.NodeName, GPUs: gpus})
			continue
		}
		if len(p.Spec.ResourceClaims) > 0 {
			claimed = dra.pendingGPUs(p)
		}
		// A pod that asks for nvidia.com/gpu too keeps that form: the
		// simulator gives a job one way to ask.
		if gpus == 0 && claimed > 0 {
			gpus = claimed
		}
		pod := Pod{Namespace: p.Namespace, Name: p.Name, GPUs: gpus, Claims: claimed > 0 && fabric.GPUsOf(p) == 0, Created: p.CreationTimestamp.Time}
		if p.Spec.Priority != nil {
			pod.Priority = *p.Spec.Priority
		}
		if k, ok := gang.Of(p); ok {
			g := gangs[k]
			if g == nil {
				take := Command
				if k.API == gang.Native {
					take = NativeCommand
				}
				errs = append(errs, fmt.Errorf("Pod %s joins PodGroup %s, which the snapshot does not hold; include podgroups: %s", key, k, take))
				continue
			}
			g.all = append(g.all, p)
			if gpus == 0 {
				leftOut(p, &dropped)
				continue
			}
			g.gpu = append(g.gpu, pod)
			continue
		}
		if gpus == 0 {
			leftOut(p, &cpuOnly)
			continue
		}
		s.Pending = append(s.Pending, pod)
	}
	for _, g := range gangs { // sorted below
		if len(g.gpu) == 0 {
			continue
		}
		slices.SortFunc(g.gpu, func(a, b Pod) int { return strings.Compare(a.Name, b.Name) })
		gang.SortByRank(g.all)
		s.Gangs = append(s.Gangs, Gang{Key: g.spec.Key, MinMember: g.spec.MinMember, Members: g.gpu,
			Policy: gang.PolicyOf(g.spec, g.all), Created: g.spec.Created})
	}
	slices.SortFunc(s.Gangs, func(a, b Gang) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Key.String(), b.Key.String())
	})
	slices.SortStableFunc(s.Pending, func(a, b Pod) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	if cpuOnly > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d pods without accelerators", cpuOnly))
	}
	if dropped > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d pending gang members without accelerators (launchers, say), from their gangs", dropped))
	}
	if other.count > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d pods whose only accelerators are ones the simulator does not simulate (%s); gang members among them are left out of their gangs",
			other.count, other.names()))
	}
	if finished > 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d finished or terminating pods", finished))
	}
	return errs
}

// unsimulated counts objects whose only accelerators (fleet.IsAccelerator)
// are ones other than fabric.GPU, and gathers their names.
type unsimulated struct {
	count int
	seen  map[v1.ResourceName]bool
}

// add counts list if it holds a positive quantity of an accelerator, and
// reports whether it did. The caller has seen that list holds no GPU.
func (u *unsimulated) add(list v1.ResourceList) bool {
	found := false
	for name, q := range list { // only sets booleans: order does not matter
		if q.Sign() > 0 && fleet.IsAccelerator(name) {
			if u.seen == nil {
				u.seen = map[v1.ResourceName]bool{}
			}
			u.seen[name] = true
			found = true
		}
	}
	if found {
		u.count++
	}
	return found
}

// names lists the accelerators seen, in name order.
func (u *unsimulated) names() string {
	names := make([]string, 0, len(u.seen))
	for name := range u.seen {
		names = append(names, string(name))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
