package coscheduling

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
)

// queueOrderOf places a pod in queue order (see ledger.QueueOrder): by
// priority, then by its gang's creation, or its own outside gangs. It reads
// only the PodGroup listers.
func (pl *Plugin) queueOrderOf(pod *v1.Pod) ledger.QueueOrder {
	o := ledger.QueueOrder{Priority: corev1helpers.PodPriority(pod), Created: pod.CreationTimestamp.Time, Group: ledger.PodOwner(pod)}
	if key, ok := pl.unitOf(pod); ok {
		o.Group = ledger.GangOwner(key)
		if created, ok := pl.sources.Created(key); ok {
			o.Created = created
		}
	}
	return o
}

type podInfoGetter interface{ GetPodInfo() fwk.PodInfo }

func podOf(e fwk.QueuedEntityInfo) *v1.Pod {
	if g, ok := e.(podInfoGetter); ok && g.GetPodInfo() != nil {
		return g.GetPodInfo().GetPod()
	}
	return nil
}

// Less orders the queue by ledger.QueueOrder, then by rank within a gang, so a
// gang's members leave the queue one after another, in the order the plan
// places them.
func (pl *Plugin) Less(a, b fwk.QueuedEntityInfo) bool {
	pa, pb := podOf(a), podOf(b)
	if pa == nil || pb == nil {
		if pa, pb := a.GetPriority(), b.GetPriority(); pa != pb {
			return pa > pb
		}
		return a.GetTimestamp().Before(b.GetTimestamp())
	}
	oa, ob := pl.queueOrderOf(pa), pl.queueOrderOf(pb)
	if c := oa.Compare(ob); c != 0 {
		return c < 0
	}
	if ra, rb := gang.RankOf(pa), gang.RankOf(pb); ra != rb {
		return ra.Less(rb)
	}
	return a.GetTimestamp().Before(b.GetTimestamp())
}

// PreEnqueue holds a member until its PodGroup exists, is valid, and has at
// least minMember members that all name the same scheduler. Members of a
// running gang (replacements, elastic extras) are not held. A held member
// is remembered, so that the member or PodGroup it waits for releases it.
func (pl *Plugin) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	own, ok := gang.Of(pod)
	if !ok {
		return nil
	}
	key := pl.unitOfGang(own)
	if label, ok := gang.OfLabel(pod); ok && label != own {
		pl.events.pod(pod, v1.EventTypeWarning, ReasonTwoPodGroups,
			"the pod names PodGroup %s in spec.schedulingGroup and PodGroup %s in its label %s: it belongs to %s alone, and %s does not count it. Remove the label",
			own, label, scheduling.PodGroupLabel, own, label)
	}
	seen := pl.ledger.Gate.Releases(key)
	status := pl.preEnqueue(ctx, pod, key)
	if !status.IsSuccess() && !pl.ledger.Gate.Hold(key, pod, seen) {
		// What this pod waits for arrived while it was being looked at;
		// look again once the queue has parked it.
		pl.ledger.Timers.After(key, ledger.RecheckTimer, recheckDelay, func() { pl.releaseGated(key) })
	}
	return status
}

// recheckDelay is how long after a missed release a held member is looked
// at again: long enough for the queue to have parked it.
const recheckDelay = 100 * time.Millisecond

func (pl *Plugin) preEnqueue(ctx context.Context, pod *v1.Pod, key gang.Key) *fwk.Status {
	u, status := pl.unit(pod, key)
	if status != nil {
		return status
	}
	spec := u.Spec()
	members := u.Members()
	if names := schedulerNames(members); len(names) > 1 {
		pl.events.gang(spec, pod, v1.EventTypeWarning, ReasonMixedSchedulerNames,
			"members name different schedulers %v, so no single scheduler can start them together: set spec.schedulerName to %q on every pod %s",
			names, pod.Spec.SchedulerName, key.JoinedBy())
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf("members of PodGroup %s name different schedulers %v", key, names))
	}
	q := u.Quorum(pl.viewOf(key))
	if pl.running(key, q) {
		return nil
	}
	if !q.Gathered {
		g := u.Gathering(q)
		if g.Invalid {
			// It can never start as it is: the Event names the fix.
			pl.events.gang(spec, nil, v1.EventTypeWarning, ReasonInvalidPodGroup, "%s", g.Event)
		} else {
			pl.events.gang(spec, pod, v1.EventTypeNormal, ReasonWaitingForMembers, "%s", g.Event)
		}
		klog.FromContext(ctx).V(5).Info("Unit has no quorum yet", "pod", klog.KObj(pod), "unit", key, "present", q.Need-q.Absent, "need", q.Need)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, g.Status)
	}
	return nil
}

func schedulerNames(pods []*v1.Pod) []string {
	names := sets.New[string]()
	for _, p := range pods {
		names.Insert(p.Spec.SchedulerName)
	}
	return sets.List(names)
}

// releaseGated lets PreEnqueue look again at a gang's held-back members.
func (pl *Plugin) releaseGated(key gang.Key) {
	if pods := pl.ledger.Gate.Release(key); len(pods) > 0 {
		pl.logger.V(5).Info("Releasing held-back gang members", "podGroup", key, "pods", len(pods))
		pl.handle.Activate(pl.logger, pods)
	}
}
