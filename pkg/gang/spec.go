package gang

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// Spec is what gpu-gang needs to know of a gang, whichever API defines it.
// Specs are built fresh from the API object on every read and never
// written afterwards.
type Spec struct {
	Key     Key
	UID     types.UID
	Created time.Time
	// Generation is the API object's metadata.generation, which changes
	// with its spec and not with its status.
	Generation int64
	// MinMember is the quorum: members that must hold a node together
	// before any may run.
	MinMember int32
	// MinResources, if set, is the total the gang needs before it starts.
	MinResources v1.ResourceList
	// Timeout bounds one attempt to place the gang: how long reserved
	// members wait for the rest. Zero means the plugin's default; it never
	// means "do not wait" (MPI Operator writes 0 by default).
	Timeout time.Duration
	// Annotations are the API object's annotations, for per-gang policies.
	// Read only.
	Annotations map[string]string
	// Topology, if set, is the placement policy the API object states in
	// a field of its own (a native PodGroup's topology constraint). It
	// wins over the annotations; see PolicyOf.
	Topology *placement.Policy
	// Disruption says whether the gang's members may be disrupted one by
	// one or only together; DisruptionUnset when the API does not say.
	Disruption DisruptionMode
	// PriorityClassName and Priority are the gang's own priority, when its
	// API gives one (a native PodGroup's spec.priority, which admission
	// resolves from spec.priorityClassName). Nil Priority means the
	// members' own.
	PriorityClassName string
	Priority          *int32
	// PreemptionPolicy, if set, says whether the gang may preempt pods of
	// lower priority; nil means the members' own.
	PreemptionPolicy *v1.PreemptionPolicy
	// Workload, if set, names the Workload and its PodGroup template the
	// gang was made from (a native PodGroup's workloadRef). Nothing waits
	// for the Workload: it is named in messages only.
	Workload *WorkloadRef
	// Parent is the name of the CompositePodGroup the PodGroup names as its
	// parent, in the same namespace (a native PodGroup's
	// spec.parentCompositePodGroupName); empty when it has none. Such a
	// PodGroup is a node of a hierarchy (Tree, RootOf).
	Parent string
	// Deleting is true while the API object is being deleted (a native
	// PodGroup stays so while pods still name it).
	Deleting bool
	// Ref names the API object in Events.
	Ref *v1.ObjectReference

	// quorumField is the API field that sets MinMember, for messages.
	quorumField string
}

// DisruptionMode says how a running gang may be disrupted (preempted,
// evicted).
type DisruptionMode string

const (
	// DisruptionUnset: the API does not say.
	DisruptionUnset DisruptionMode = ""
	// DisruptionSingle: members may be disrupted independently.
	DisruptionSingle DisruptionMode = "Single"
	// DisruptionAll: the gang is disrupted whole or not at all.
	DisruptionAll DisruptionMode = "All"
)

// WorkloadRef names a Workload and one of its PodGroup templates.
type WorkloadRef struct {
	Name     string
	Template string
}

// FromPodGroup adapts a scheduler-plugins PodGroup.
func FromPodGroup(pg *v1alpha1.PodGroup) *Spec {
	s := &Spec{
		Key:          Key{Namespace: pg.Namespace, Name: pg.Name},
		UID:          pg.UID,
		Created:      pg.CreationTimestamp.Time,
		Generation:   pg.Generation,
		MinMember:    pg.Spec.MinMember,
		MinResources: pg.Spec.MinResources,
		Annotations:  pg.Annotations,
		Deleting:     pg.DeletionTimestamp != nil,
		Ref: &v1.ObjectReference{
			APIVersion:      v1alpha1.SchemeGroupVersion.String(),
			Kind:            "PodGroup",
			Namespace:       pg.Namespace,
			Name:            pg.Name,
			UID:             pg.UID,
			ResourceVersion: pg.ResourceVersion,
		},
		quorumField: "spec.minMember",
	}
	if t := pg.Spec.ScheduleTimeoutSeconds; t != nil && *t > 0 {
		s.Timeout = time.Duration(*t) * time.Second
	}
	return s
}

// Validate reports what makes the spec impossible to honour, with the fix.
func (s *Spec) Validate() error {
	if s.MinMember < 1 {
		field := s.quorumField
		if field == "" {
			field = "the gang's quorum"
		}
		return fmt.Errorf("%s is %d: set it to the number of pods that must start together (at least 1)", field, s.MinMember)
	}
	return nil
}
