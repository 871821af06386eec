package integration

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	upstream "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling/v1alpha1"
	"github.com/gpu-gang/gpu-gang/pkg/controller/podgroup"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/lifecycle"
)

// statusTimeout bounds the wait for the controller to reflect a change.
const statusTimeout = 30 * time.Second

// getPodGroup reads a PodGroup with the status fields gpu-gang adds.
func (env *testEnv) getPodGroup(name string) *v1alpha1.PodGroup {
	env.t.Helper()
	pg := &v1alpha1.PodGroup{}
	if err := statusClient(env.t).Get(env.t.Context(), types.NamespacedName{Namespace: env.ns, Name: name}, pg); err != nil {
		env.t.Fatalf("reading PodGroup %s: %v", name, err)
	}
	return pg
}

func statusClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(controlPlane.JSONConfig(), client.Options{Scheme: podgroup.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitForStatus waits until PodGroup name's status satisfies ok, and
// returns the PodGroup.
func (env *testEnv) waitForStatus(name, what string, ok func(*v1alpha1.PodGroup) bool) *v1alpha1.PodGroup {
	env.t.Helper()
	c := statusClient(env.t)
	pg := &v1alpha1.PodGroup{}
	err := waitFor(env.t.Context(), statusTimeout, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, types.NamespacedName{Namespace: env.ns, Name: name}, pg); err != nil {
			return false, err
		}
		return ok(pg), nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for PodGroup %s: %s: %v; status: %+v", statusTimeout, name, what, err, pg.Status)
	}
	return pg
}

// expectCondition waits up to eventTimeout until PodGroup pg has the
// condition, checked against its current generation: the controller may
// still be catching up with a change (a deletion sets a new generation).
func (env *testEnv) expectCondition(pg *v1alpha1.PodGroup, condType string, status metav1.ConditionStatus, reason string) {
	env.t.Helper()
	var last *metav1.Condition
	var gen int64
	err := waitFor(env.t.Context(), eventTimeout, func(ctx context.Context) (bool, error) {
		cur := &v1alpha1.PodGroup{}
		if err := statusClient(env.t).Get(ctx, types.NamespacedName{Namespace: env.ns, Name: pg.Name}, cur); err != nil {
			return false, err
		}
		last, gen = meta.FindStatusCondition(cur.Status.Conditions, condType), cur.Generation
		return last != nil && last.Status == status && last.Reason == reason && last.ObservedGeneration == gen, nil
	})
	if err != nil {
		env.t.Errorf("PodGroup %s condition %s = %+v at generation %d; want status %s, reason %s, observed generation %d: %v",
			pg.Name, condType, last, gen, status, reason, gen, err)
	}
}

func hasCondition(pg *v1alpha1.PodGroup, condType string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(pg.Status.Conditions, condType)
	return c != nil && c.Status == status && c.Reason == reason
}

// A gang's PodGroup goes Pending while members are missing, Scheduling once
// they exist, Running once kwok runs them, and Finished once they succeed,
// with the counts, conditions, observedGeneration and an Event at each
// phase change, all through the real API server.
func TestPodGroupStatusFollowsTheGang(t *testing.T) {
	env := newTestEnv(t)
	env.kwokNodes(2, 8)
	startKwok(t)
	startPodGroupController(t, podgroup.DefaultMissingMembersGrace)
	phases := env.recordPodGroupPhases()

	env.createPodGroup(gangtest.MakePodGroup("train", env.ns).MinMember(2).Obj())
	member := func(name string) *v1.Pod {
		return env.gangPod(name, "train").Res(gpuRequest(8)).
			Annotation(lifecycle.RunForAnnotation, (2 * time.Second).String()).Obj()
	}
	env.createPods(member("train-0"))
	pg := env.waitForStatus("train", "one member of two present", func(pg *v1alpha1.PodGroup) bool {
		return pg.Status.Phase == upstream.PodGroupPending && hasCondition(pg, podgroup.ConditionMembersCreated, metav1.ConditionFalse, podgroup.ReasonWaitingForMembers)
	})
	env.expectCondition(pg, podgroup.ConditionScheduled, metav1.ConditionFalse, podgroup.ReasonWaitingForMembers)
	if !pg.Status.ScheduleStartTime.IsZero() {
		t.Errorf("scheduleStartTime is %v before the gang could be scheduled", pg.Status.ScheduleStartTime)
	}

	env.createPods(member("train-1"))
	phases.waitFor(t, jobDoneTimeout, "train", upstream.PodGroupPending, upstream.PodGroupScheduling, upstream.PodGroupRunning, upstream.PodGroupFinished)
	pg = env.getPodGroup("train")
	if pg.Status.Succeeded != 2 || pg.Status.Running != 0 || pg.Status.Failed != 0 {
		t.Errorf("counts: running %d, succeeded %d, failed %d; want 0, 2, 0", pg.Status.Running, pg.Status.Succeeded, pg.Status.Failed)
	}
	if pg.Status.ScheduleStartTime.IsZero() {
		t.Error("scheduleStartTime is not set")
	}
	if pg.Status.ObservedGeneration != pg.Generation {
		t.Errorf("observedGeneration = %d, want %d", pg.Status.ObservedGeneration, pg.Generation)
	}
	env.expectCondition(pg, podgroup.ConditionMembersCreated, metav1.ConditionTrue, podgroup.ReasonEnoughMembers)
	env.expectCondition(pg, podgroup.ConditionScheduled, metav1.ConditionTrue, podgroup.ReasonQuorumScheduled)
	for _, reason := range []string{podgroup.EventGangScheduling, coscheduling.ReasonGangScheduled, podgroup.EventGangRunning, podgroup.EventGangFinished} {
		env.waitForEvent("PodGroup", "train", reason)
	}

	// A spec change is a new generation; the status says it has seen it.
	patch := []byte(`{"spec":{"scheduleTimeoutSeconds":30}}`)
	if _, err := pgClient.SchedulingV1alpha1().PodGroups(env.ns).Patch(t.Context(), "train", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	env.waitForStatus("train", "observedGeneration to follow a spec change", func(pg *v1alpha1.PodGroup) bool {
		return pg.Generation > 1 && pg.Status.ObservedGeneration == pg.Generation
	})
}

// A gang whose remaining members are never created is reported, once the
// grace period has passed, in a condition and a warning Event, while the
// members that exist wait unbound.
func TestPodGroupReportsMembersThatNeverCome(t *testing.T) {
	const grace = 3 * time.Second
	env := newTestEnv(t)
	env.gpuNodes(4, 8)
	startPodGroupController(t, grace)

	env.createPodGroup(gangtest.MakePodGroup("stuck", env.ns).MinMember(3).Obj())
	pods := env.gangPods("stuck", 2, 8)
	env.createPods(pods...)

	env.waitForEvent("PodGroup", "stuck", coscheduling.ReasonWaitingForMembers)
	ev := env.waitForEvent("PodGroup", "stuck", podgroup.EventMembersMissing)
	if ev.Type != v1.EventTypeWarning {
		t.Errorf("the %s Event is of type %s, want %s", ev.Reason, ev.Type, v1.EventTypeWarning)
	}
	t.Logf("Event: %s", ev.Note)
	pg := env.getPodGroup("stuck")
	env.expectCondition(pg, podgroup.ConditionMembersCreated, metav1.ConditionFalse, podgroup.ReasonMembersMissing)
	if pg.Status.Phase != upstream.PodGroupPending {
		t.Errorf("phase = %s, want %s", pg.Status.Phase, upstream.PodGroupPending)
	}
	env.expectStaysUnbound(staysUnboundWindow, pods...)
}
