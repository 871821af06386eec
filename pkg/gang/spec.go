package gang

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// Spec is what gpu-gang needs to know of a gang, whichever API defines it.
// Specs are built fresh from the API object on every read and never
// written afterwards.
type Spec struct {
	Key     Key
	UID     types.UID
	Created time.Time
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
	// Ref names the API object in Events.
	Ref *v1.ObjectReference
}

// FromPodGroup adapts a scheduler-plugins PodGroup.
func FromPodGroup(pg *v1alpha1.PodGroup) *Spec {
	s := &Spec{
		Key:          Key{Namespace: pg.Namespace, Name: pg.Name},
		UID:          pg.UID,
		Created:      pg.CreationTimestamp.Time,
		MinMember:    pg.Spec.MinMember,
		MinResources: pg.Spec.MinResources,
		Annotations:  pg.Annotations,
		Ref: &v1.ObjectReference{
			APIVersion:      v1alpha1.SchemeGroupVersion.String(),
			Kind:            "PodGroup",
			Namespace:       pg.Namespace,
			Name:            pg.Name,
			UID:             pg.UID,
			ResourceVersion: pg.ResourceVersion,
		},
	}
	if t := pg.Spec.ScheduleTimeoutSeconds; t != nil && *t > 0 {
		s.Timeout = time.Duration(*t) * time.Second
	}
	return s
}

// Validate reports what makes the spec impossible to honour, with the fix.
func (s *Spec) Validate() error {
	if s.MinMember < 1 {
		return fmt.Errorf("spec.minMember is %d: set it to the number of pods that must start together (at least 1)", s.MinMember)
	}
	return nil
}
