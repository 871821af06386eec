package gang

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// NativeServed asks discovery whether the API server serves native
// PodGroups (scheduling.k8s.io/v1beta1 podgroups, with list and watch).
// They are served only with the GenericWorkload feature gate on and
// --runtime-config=scheduling.k8s.io/v1beta1=true on the API server. An
// error other than "not served" (the server is starting, a network blip) is
// retried every second for up to timeout, then returned. The scheduler
// plugin and the status controller both decide with it, once, at start-up.
func NativeServed(ctx context.Context, disc discovery.DiscoveryInterface, timeout time.Duration) (bool, error) {
	gv := schedulingv1beta1.SchemeGroupVersion.String()
	var served bool
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		list, err := disc.ServerResourcesForGroupVersion(gv)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			last = err
			return false, nil
		}
		for _, r := range list.APIResources {
			if r.Name == "podgroups" && slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "watch") {
				served = true
			}
		}
		return true, nil
	})
	if err != nil {
		return false, fmt.Errorf("asking the API server whether it serves %s podgroups: %w", gv, errors.Join(err, last))
	}
	return served, nil
}

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
