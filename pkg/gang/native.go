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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
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
	return served(ctx, disc, schedulingv1beta1.SchemeGroupVersion.WithResource("podgroups"), timeout)
}

// served asks discovery whether the API server serves the resource with
// list and watch; see NativeServed.
func served(ctx context.Context, disc discovery.DiscoveryInterface, gvr schema.GroupVersionResource, timeout time.Duration) (bool, error) {
	gv := gvr.GroupVersion().String()
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
			if r.Name == gvr.Resource && slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "watch") {
				served = true
			}
		}
		return true, nil
	})
	if err != nil {
		return false, fmt.Errorf("asking the API server whether it serves %s %s: %w", gv, gvr.Resource, errors.Join(err, last))
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
//     carried for preemption; workloadRef for messages;
//   - parentCompositePodGroupName places it in a hierarchy (Tree).
//
// The API has no schedule timeout, so the plugin's default applies.
func FromNativePodGroup(pg *schedulingv1beta1.PodGroup) *Spec {
	s := &Spec{
		Key:               Key{API: Native, Namespace: pg.Namespace, Name: pg.Name},
		UID:               pg.UID,
		Created:           pg.CreationTimestamp.Time,
		Generation:        pg.Generation,
		Parent:            ptr.Deref(pg.Spec.ParentCompositePodGroupName, ""),
		Annotations:       pg.Annotations,
		Deleting:          pg.DeletionTimestamp != nil,
		PriorityClassName: pg.Spec.PriorityClassName,
		Priority:          copyPriority(pg.Spec.Priority),
		PreemptionPolicy:  preemptionOf(pg.Spec.PreemptionPolicy),
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
	if r := pg.Spec.WorkloadRef; r != nil {
		s.Workload = &WorkloadRef{Name: r.WorkloadName, Template: r.TemplateName}
	}
	return s
}

// DiscoveryTimeout bounds how long DecideNative retries a discovery request
// that fails for another reason than the API not being served.
const DiscoveryTimeout = 30 * time.Second

// DecideNative decides, once, at start-up, whether gpu-gang schedules native
// PodGroups (scheduling.k8s.io/v1beta1): only if the API server serves them
// and this scheduler runs with the GenericWorkload feature gate off
// (genericWorkload). The note says what gpu-gang does with them and, when
// it ignores them, why and what would change that.
//
// With the gate on, kube-scheduler's queue takes every pod that sets
// spec.schedulingGroup out of pod-by-pod scheduling into its own PodGroup
// cycle, which reserves and unreserves each member while it tries a
// placement; gpu-gang cannot hold, plan and release such pods, so it holds
// them in PreEnqueue with an Event that says how to fix it instead of
// letting that cycle run them half-understood. Every plugin that reads
// native PodGroups decides with it, so they all read the same ones.
func DecideNative(ctx context.Context, disc discovery.DiscoveryInterface, genericWorkload bool) (scheduled bool, note string, err error) {
	gv := schedulingv1beta1.SchemeGroupVersion.String()
	if genericWorkload {
		return false, "this scheduler runs with the GenericWorkload feature gate on, which hands pods that set spec.schedulingGroup to kube-scheduler's own PodGroup cycle; " +
			"run gpu-gang-scheduler with --feature-gates=GenericWorkload=false (the Kubernetes 1.37 default; the API server keeps its own gates) to have gpu-gang schedule them", nil
	}
	served, err := NativeServed(ctx, disc, DiscoveryTimeout)
	if err != nil {
		return false, "", err
	}
	if !served {
		return false, fmt.Sprintf("the API server does not serve %s podgroups (it needs the GenericWorkload feature gate and --runtime-config=%s=true); restart gpu-gang-scheduler once it does",
			gv, gv), nil
	}
	return true, fmt.Sprintf("the API server serves %s podgroups: pods that set spec.schedulingGroup are gangs, as pods labelled %s are", gv, scheduling.PodGroupLabel), nil
}
