package gang

import (
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// FromNativePodGroup adapts a Kubernetes PodGroup (scheduling.k8s.io/v1beta1):
//   - a gang policy's minCount is the quorum; a basic policy (pods that
//     may start one by one) is a quorum of 1, so each member schedules on
//     its own, next to the members already placed;
//   - a topology constraint's key is a required level, read by the planner
//     with the same level rules as gpu-gang's own annotations;
//   - disruptionMode, priority, priorityClassName and preemptionPolicy are
//     carried for preemption; workloadRef for messages.
//
// The API has no schedule timeout, so the plugin's default applies.
func FromNativePodGroup(pg *schedulingv1beta1.PodGroup) *Spec {
	s := &Spec{
		Key:               Key{API: Native, Namespace: pg.Namespace, Name: pg.Name},
		UID:               pg.UID,
		Created:           pg.CreationTimestamp.Time,
		Annotations:       pg.Annotations,
		Deleting:          pg.DeletionTimestamp != nil,
		PriorityClassName: pg.Spec.PriorityClassName,
		Ref: &v1.ObjectReference{
			APIVersion:      schedulingv1beta1.SchemeGroupVersion.String(),
			Kind:            "PodGroup",
			Namespace:       pg.Namespace,
			Name:            pg.Name,
			UID:             pg.UID,
			ResourceVersion: pg.ResourceVersion,
		},
		quorumField: "spec.schedulingPolicy.gang.minCount",
	}
	switch p := pg.Spec.SchedulingPolicy; {
	case p.Gang != nil:
		s.MinMember = p.Gang.MinCount
	case p.Basic != nil:
		s.MinMember = 1
	default:
		// The API server requires one of the two; an object without
		// either cannot be honoured, and Validate says so.
		s.quorumField = "spec.schedulingPolicy (neither basic nor gang is set), so the quorum"
	}
	if c := pg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 && c.Topology[0].Key != "" {
		// The API allows one constraint; it is always hard.
		s.Topology = &placement.Policy{Level: c.Topology[0].Key, Required: true}
	}
	if m := pg.Spec.DisruptionMode; m != nil {
		switch {
		case m.All != nil:
			s.Disruption = DisruptionAll
		case m.Single != nil:
			s.Disruption = DisruptionSingle
		}
	} else {
		s.Disruption = DisruptionSingle // the API's default
	}
	if p := pg.Spec.Priority; p != nil {
		s.Priority = new(int32)
		*s.Priority = *p
	}
	if p := pg.Spec.PreemptionPolicy; p != nil {
		policy := v1.PreemptionPolicy(*p)
		s.PreemptionPolicy = &policy
	}
	if r := pg.Spec.WorkloadRef; r != nil {
		s.Workload = &WorkloadRef{Name: r.WorkloadName, Template: r.TemplateName}
	}
	return s
}
