package gang

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Segments slice one role of a job: the workers whose ranks the training
// framework lays out, not a launcher, master or chief beside them.
//
//   - Kueue's slice annotations are per PodSet: Kueue reads them from one
//     pod template and slices that PodSet alone, and it requires the size
//     to divide that PodSet's count. The segments cover the members that
//     carry them. A leader (IsLeader) without them, or with a set of its
//     own (a slice size of 1, say), is outside: its PodSet holds one pod,
//     so a slice of it never holds a worker. A leader whose template
//     carries the very same annotations as the workers' says nothing Kueue
//     could honour (a one-pod PodSet cannot be cut into slices of K > 1),
//     so the annotations are read as gpu-gang's own, below. Members of two
//     roles that both carry slice annotations (a TFJob's parameter servers
//     and workers, say) would need a hierarchy per role; gpu-gang segments
//     one role per PodGroup and says so.
//   - gpu-gang's own annotations are on the PodGroup, which has no roles.
//     They cover every member, as they always have: a PyTorchJob's master is
//     torch rank 0 and belongs in segment 0 with workers 0 to K-2. But when
//     the size divides the quorum without the gang's leaders and not with
//     them (a launcher beside 8 workers sliced by 4: 9 members, 8 workers),
//     only the workers can be what the size divides, and the leaders are
//     outside. The quorum, not the members present, decides, so that a
//     member lost and not yet replaced does not move the others between
//     segments.
//
// Members outside the segments sit in no segment, count in neither the
// divisibility check nor the ordinals (Assign), and are placed under the
// gang's own policy (Hierarchy).

// coverage says which of a gang's members its segments cover; the zero
// value covers every member.
type coverage struct {
	// leadersOut leaves the gang's leaders (IsLeader) outside.
	leadersOut bool
	// kueue, when set, covers only the members whose annotations carry
	// Kueue's slice size and level with the values size and level.
	kueue       bool
	size, level string
}

// covers reports whether the segments cover p.
func (c coverage) covers(p *v1.Pod) bool {
	if c.leadersOut && IsLeader(p) {
		return false
	}
	if c.kueue {
		a := p.Annotations
		return a[scheduling.KueueSliceSizeAnnotation] == c.size && a[scheduling.KueueSliceRequiredTopologyAnnotation] == c.level
	}
	return true
}

// Covers reports whether a segmented gang's segments cover member p: false
// for a launcher, master or chief (or any member) outside them, which sits
// in no segment (see Assign).
func (seg Segments) Covers(p *v1.Pod) bool { return seg.cover.covers(p) }

// leadersOutside decides whether the PodGroup's segments of size k leave the
// leaders among members outside: when k divides minMember without them and
// not with them.
func leadersOutside(members []*v1.Pod, minMember, k int32) bool {
	leaders := int32(0)
	for _, p := range members {
		if IsLeader(p) {
			leaders++
		}
	}
	return leaders > 0 && minMember%k != 0 && minMember > leaders && (minMember-leaders)%k == 0
}

// slicedBy returns the lowest-ranked of the members whose annotations carry
// either of Kueue's slice annotations, leaders left out (nil when none
// does), and whether a leader carries the same two values as it. The error
// names the roles when members of more than one role, or members with
// different slice annotations, carry them.
func slicedBy(members []*v1.Pod) (first *v1.Pod, leaderCopies bool, err error) {
	type role struct{ replicaType, size, level string }
	var roles []role
	example := map[role]*v1.Pod{}
	var leaders []role
	for _, p := range members {
		a := p.Annotations
		size, sized := a[scheduling.KueueSliceSizeAnnotation]
		level := a[scheduling.KueueSliceRequiredTopologyAnnotation]
		if !sized && level == "" {
			continue
		}
		r := role{p.Labels[scheduling.KubeflowReplicaTypeLabel], size, level}
		if IsLeader(p) {
			leaders = append(leaders, r)
			continue
		}
		if q, ok := example[r]; !ok {
			roles = append(roles, r)
			example[r] = p
		} else if RankOf(p).Less(RankOf(q)) {
			example[r] = p
		}
		if first == nil || RankOf(p).Less(RankOf(first)) {
			first = p
		}
	}
	switch len(roles) {
	case 0:
		return nil, false, nil
	case 1:
		r := roles[0]
		return first, slices.ContainsFunc(leaders, func(l role) bool { return l.size == r.size && l.level == r.level }), nil
	}
	slices.SortFunc(roles, func(a, b role) int {
		return strings.Compare(example[a].Name, example[b].Name)
	})
	var parts []string
	for _, r := range roles {
		p := example[r]
		what := "pod " + p.Namespace + "/" + p.Name
		if r.replicaType != "" {
			what += " (replica type " + r.replicaType + ")"
		}
		parts = append(parts, fmt.Sprintf("%s has %s=%q and %s=%q", what,
			scheduling.KueueSliceSizeAnnotation, r.size, scheduling.KueueSliceRequiredTopologyAnnotation, r.level))
	}
	return nil, false, fmt.Errorf("Kueue's slice annotations slice more than one role of the gang (%s): gpu-gang segments one role per PodGroup; "+
		"keep the slice annotations on one role's pod template (the workers'), or give each role a PodGroup of its own", strings.Join(parts, "; "))
}

// outsideOf describes the members outside the segments, for messages.
func outsideOf(members []*v1.Pod, seg Segments) (n int32, what string) {
	var names []string
	for _, p := range members {
		if !seg.Covers(p) {
			n++
			if len(names) < 3 {
				names = append(names, p.Namespace+"/"+p.Name)
			}
		}
	}
	switch {
	case n == 0:
		return 0, ""
	case n == 1:
		return n, "pod " + names[0]
	case int(n) > len(names):
		return n, fmt.Sprintf("%d pods: %s and %d more", n, strings.Join(names, ", "), int(n)-len(names))
	}
	return n, fmt.Sprintf("%d pods: %s", n, strings.Join(names, ", "))
}
