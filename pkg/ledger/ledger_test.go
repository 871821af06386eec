package ledger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

func TestQueueOrder(t *testing.T) {
	for _, tt := range []struct {
		name string
		a, b QueueOrder
		want int
	}{
		{name: "higher priority first", a: QueueOrder{Priority: 1, Created: t0.Add(time.Hour), Group: "z"}, b: QueueOrder{Created: t0, Group: "a"}, want: -1},
		{name: "then the gang created first", a: QueueOrder{Created: t0, Group: "z"}, b: QueueOrder{Created: t0.Add(time.Second), Group: "a"}, want: -1},
		{name: "then by name", a: QueueOrder{Created: t0, Group: "b"}, b: QueueOrder{Created: t0, Group: "a"}, want: 1},
		{name: "the same gang", a: QueueOrder{Created: t0, Group: "a"}, b: QueueOrder{Created: t0, Group: "a"}, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.a.Compare(tt.b))
			require.Equal(t, -tt.want, tt.b.Compare(tt.a))
			require.Equal(t, tt.want < 0, tt.a.Before(tt.b))
		})
	}
}

func TestOwner(t *testing.T) {
	lone := pod("p")
	member := pod("m")
	member.Labels = map[string]string{"scheduling.x-k8s.io/pod-group": "job"}
	require.Equal(t, "pod/ns/p", Owner(lone))
	require.Equal(t, "pg/ns/job", Owner(member))
	require.Equal(t, GangOwner(key("job")), Owner(member))
}

func TestHeldByOthersSumsHeldPlansAndHead(t *testing.T) {
	l, _ := newTestLedger()
	l.HoldPlan(key("a"), []Slot{slot("a-0", "n1", 4), slot("a-1", "n2", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	l.HoldPlan(key("b"), []Slot{slot("b-0", "n1", 2)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	l.Head.Take(key("h"), second, []Slot{slot("h-0", "n2", 8)}, turnLength)
	for _, tt := range []struct {
		name  string
		self  string
		order QueueOrder
		want  map[string]capacity.Amounts
	}{
		{name: "everything, from behind the head", self: "x", order: third, want: map[string]capacity.Amounts{
			"n1": {gpu: 6, "pods": 2}, "n2": {gpu: 16, "pods": 2}}},
		{name: "not its own held plan", self: "a", order: third, want: map[string]capacity.Amounts{
			"n1": gpus(2), "n2": gpus(8)}},
		{name: "not the head's hold, from before it", self: "x", order: first, want: map[string]capacity.Amounts{
			"n1": {gpu: 6, "pods": 2}, "n2": gpus(8)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, l.HeldByOthers(key(tt.self), tt.order))
		})
	}
}

// Held counts every held plan and the head hold, the holder's own included,
// and forgets a held plan past its deadline and a turn that ran out.
func TestHeldSumsEveryHeldPlanAndTheHead(t *testing.T) {
	l, clk := newTestLedger()
	require.Empty(t, l.Held())
	l.HoldPlan(key("a"), []Slot{slot("a-0", "n1", 4), slot("a-1", "n2", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	l.Head.Take(key("h"), second, []Slot{slot("h-0", "n2", 8)}, 2*time.Minute)
	require.Equal(t, capacity.Amounts{gpu: 20, "pods": 3}, l.Held())
	l.Reservations.Reserve(key("a"), "a-0", "n1", gpus(4))
	require.Equal(t, capacity.Amounts{gpu: 16, "pods": 2}, l.Held(), "a reserved member is no longer held by the held plan")
	clk.Step(time.Minute)
	require.Equal(t, capacity.Amounts{gpu: 8, "pods": 1}, l.Held(), "a's held plan ran out")
	clk.Step(time.Minute)
	require.Empty(t, l.Held(), "the head's turn ran out")
}

func TestIdleKeepsTheBackoff(t *testing.T) {
	l, c := newTestLedger()
	k := key("job")
	l.HoldPlan(k, []Slot{slot("a", "n1", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	l.Reservations.Reserve(k, "a", "n1", gpus(8))
	l.Lessons.LearnCap(k, "tmpl", 1)
	l.Preemptions.Start(GangOwner(k), &Preemption{Until: t0.Add(time.Hour)})
	l.Succeed(k)
	l.Lessons.LearnCap(k, "tmpl", 1)

	l.Idle(k)
	require.True(t, l.Reservations.Admitted(k), "a member still holds its node")
	require.Equal(t, 1, l.Lessons.View(k).PerNode["tmpl"])
	require.True(t, l.Preemptions.Preempting(GangOwner(k)))

	_, inFlight := l.ForgetPod(k, "a")
	require.False(t, inFlight, "the member's attempt is over")
	l.HoldPlan(k, nil, c.Now().Add(time.Minute), &placement.Plan{}, 1)
	l.Reservations.Fail(k, "why", true, time.Minute, time.Hour)
	l.Head.Take(k, first, []Slot{slot("b", "n1", 8)}, turnLength)
	l.Idle(k)
	require.False(t, l.Reservations.Admitted(k))
	require.Empty(t, l.Lessons.View(k).PerNode)
	require.False(t, l.Preemptions.Preempting(GangOwner(k)))
	_, heads := l.Head.Holder()
	require.False(t, heads, "a gang with no member waiting holds nothing")
	_, _, backingOff := l.Reservations.Backoff(k)
	require.True(t, backingOff, "the backoff is kept, so recreated members do not retry in a hot loop")
	require.True(t, l.Knows(k))
}

func TestForgetGangLeavesNothing(t *testing.T) {
	l, c := newTestLedger()
	k := key("job")
	l.Gate.Hold(k, pod("held"), l.Gate.Releases(k))
	l.Gate.Release(k)
	l.Gate.Hold(k, pod("held"), l.Gate.Releases(k))
	l.HoldPlan(k, []Slot{slot("a", "n1", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	l.Reservations.Reserve(k, "a", "n1", gpus(8))
	l.Lessons.LearnExclusion(k, "tmpl", "n1")
	l.Preemptions.Start(GangOwner(k), &Preemption{Until: t0.Add(time.Hour)})
	_, since := l.Head.Take(k, first, nil, turnLength)
	c.Step(turnLength)
	l.Head.EndTurn(k, since)
	l.Timers.After(k, YieldEndTimer, turnLength, func() {})

	l.ForgetGang(k)
	require.False(t, l.Knows(k))
	require.False(t, c.HasWaiters())
	require.Equal(t, 1, l.Gate.Held(k), "held-back members wait for the PodGroup to come back")
}

func TestForgetPodInFlightAndGated(t *testing.T) {
	l, _ := newTestLedger()
	k := key("job")
	l.Gate.Hold(k, pod("g"), 0)
	l.HoldPlan(k, []Slot{slot("a", "n1", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	l.Reservations.Reserve(k, "a", "n1", gpus(8))
	unit, inFlight := l.ForgetPod(key("moved"), "a")
	require.True(t, inFlight, "a member of the attempt in flight")
	require.Equal(t, k, unit, "found under the unit it reserved under, though the pod now names another")
	_, inFlight = l.ForgetPod(k, "a")
	require.False(t, inFlight, "once")
	_, inFlight = l.ForgetPod(k, types.UID("g-uid"))
	require.False(t, inFlight)
	require.Zero(t, l.Gate.Held(k))
}

func TestForgetPodWithADesignatedSlot(t *testing.T) {
	// In a plan with a hierarchy no member may take a deleted member's
	// slot: its deletion ends the attempt before the member reserves.
	for _, tt := range []struct {
		name string
		plan *placement.Plan
		want bool
	}{
		{"flat: a recreated member takes the slot", &placement.Plan{}, false},
		{"hierarchical: the attempt cannot complete", &placement.Plan{Subgroups: []placement.SubgroupPlan{{}}}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := newTestLedger()
			k := key("job")
			l.HoldPlan(k, []Slot{slot("a", "n1", 8), slot("b", "n2", 8)}, t0.Add(time.Minute), tt.plan, 1)
			_, inFlight := l.ForgetPod(k, "b")
			require.Equal(t, tt.want, inFlight)
			_, inFlight = l.ForgetPod(k, "x")
			require.False(t, inFlight, "a member outside the plan")
		})
	}
}

func TestFailPlanAndSucceedTeachAndForget(t *testing.T) {
	l, _ := newTestLedger()
	k := key("job")
	l.FailPlan(k)
	require.Empty(t, l.Lessons.View(k).Failed, "no attempt, no plan to remember")
	l.HoldPlan(k, []Slot{slot("a", "n1", 8)}, t0.Add(time.Minute), &placement.Plan{}, 7)
	l.FailPlan(k)
	require.Equal(t, map[uint64]bool{7: true}, l.Lessons.View(k).Failed)
	l.Succeed(k)
	require.Empty(t, l.Lessons.View(k).Failed, "a gang that reached quorum forgets its lessons")
}

func TestWaiting(t *testing.T) {
	l, _ := newTestLedger()
	l.Gate.Hold(key("g1"), pod("x"), 0)
	l.Gate.Hold(key("g1"), pod("y"), 0)
	l.Gate.Hold(key("g2"), pod("z"), 0)
	l.HoldPlan(key("p"), []Slot{slot("a", "n1", 8), slot("b", "n2", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	l.Reservations.Reserve(key("p"), "a", "n1", gpus(8))
	members, placing, reserved := l.Waiting()
	require.Equal(t, []int{2, 1, 1}, []int{members, placing, reserved})
}

// A moved gang's new places outlive its having no member, until their
// deadline, so that the pods its controller recreates take them; a plain
// held plan does not.
func TestHoldMovedOutlivesIdle(t *testing.T) {
	l, c := newTestLedger()
	moved, plain := key("moved"), key("plain")
	l.HoldPlan(moved, []Slot{slot("m", "n1", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	l.Reservations.Reserve(moved, "m", "n1", gpus(8))
	l.Succeed(moved)
	l.HoldMoved(moved, []Slot{slot("m", "n2", 8)}, t0.Add(2*time.Minute), &placement.Plan{}, 2)
	l.HoldPlan(plain, []Slot{slot("p", "n3", 8)}, t0.Add(2*time.Minute), &placement.Plan{}, 1)

	_, inFlight := l.ForgetPod(moved, "m")
	require.False(t, inFlight, "the evicted pod was reserved in the attempt that ran, not in the move's")
	l.Idle(moved)
	l.Idle(plain)
	require.False(t, l.Reservations.Admitted(moved), "with no member the moved gang is no longer running")
	nodes, ok := l.Reservations.PlanSlots(moved, "recreated", gpus(8))
	require.True(t, ok)
	require.Equal(t, []string{"n2"}, nodes, "a recreated member takes the held place")
	_, ok = l.Reservations.PlanSlots(plain, "p", gpus(8))
	require.False(t, ok, "a plain held plan ends when no member waits")
	require.Equal(t, map[string]capacity.Amounts{"n2": {gpu: 8, "pods": 1}}, l.HeldByOthers(key("x"), third))

	c.Step(2 * time.Minute)
	_, ok = l.Reservations.PlanSlots(moved, "recreated", gpus(8))
	require.False(t, ok, "the hold ends at its deadline")
}
