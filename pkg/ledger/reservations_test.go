package ledger

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const gpu = v1.ResourceName("nvidia.com/gpu")

func gpus(n int64) capacity.Amounts { return capacity.Amounts{gpu: n, v1.ResourcePods: 1} }

func key(name string) gang.Key { return gang.Key{Namespace: "ns", Name: name} }

func slot(uid, node string, n int64) Slot {
	return Slot{UID: types.UID(uid), Node: node, Request: gpus(n)}
}

func newTestLedger() (*Ledger, *testingclock.FakeClock) {
	c := testingclock.NewFakeClock(t0)
	return New(c), c
}

func TestPickSlot(t *testing.T) {
	slots := []Slot{slot("a", "n1", 8), slot("b", "n2", 4), slot("c", "n2", 8)}
	for _, tt := range []struct {
		name  string
		uid   string
		node  string
		req   int64
		alike bool // members are interchangeable (a gang, not a composite)
		want  int
	}{
		{name: "the slot designated to the member, wherever it reserved", uid: "c", node: "n1", req: 8, alike: true, want: 2},
		{name: "designation wins over a fit on the node", uid: "b", node: "n1", req: 4, alike: true, want: 1},
		{name: "a slot on the node it reserved that it fits", uid: "x", node: "n2", req: 8, alike: true, want: 2},
		{name: "else the first slot it fits anywhere", uid: "x", node: "n9", req: 8, alike: true, want: 0},
		{name: "a small member fits the first slot", uid: "x", node: "n2", req: 2, alike: true, want: 1},
		{name: "no slot it fits", uid: "x", node: "n1", req: 16, alike: true, want: -1},
		{name: "a composite's member takes its own slot", uid: "b", node: "n2", req: 4, want: 1},
		{name: "and no other, even one it fits on its node", uid: "x", node: "n2", req: 8, want: -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, pickSlot(slots, types.UID(tt.uid), tt.node, gpus(tt.req), tt.alike))
		})
	}
}

func TestPlanSlots(t *testing.T) {
	l, c := newTestLedger()
	k := key("job")
	_, ok := l.Reservations.PlanSlots(k, "a", gpus(8))
	require.False(t, ok, "no held plan, no plan")
	l.HoldPlan(k, []Slot{slot("a", "n3", 8), slot("b", "n1", 8), slot("c", "n2", 4), slot("d", "n1", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	for _, tt := range []struct {
		name string
		uid  string
		req  int64
		want []string
	}{
		{name: "designated", uid: "a", req: 8, want: []string{"n3"}},
		{name: "undesignated: every node with a slot it fits, once, in name order", uid: "x", req: 8, want: []string{"n1", "n3"}},
		{name: "undesignated and small", uid: "x", req: 4, want: []string{"n1", "n2", "n3"}},
		{name: "nothing fits", uid: "x", req: 16, want: nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := l.Reservations.PlanSlots(k, types.UID(tt.uid), gpus(tt.req))
			require.True(t, ok)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlanSlots (-want,+got):\n%s", diff)
			}
		})
	}
	c.Step(time.Minute)
	_, ok = l.Reservations.PlanSlots(k, "a", gpus(8))
	require.False(t, ok, "a held plan past its deadline plans nothing")
}

func TestPlanWithHierarchyDesignatesSlots(t *testing.T) {
	// A segmented gang's plan: a and b in one segment's domain. x, a member
	// outside the attempt, neither plans into their slots nor takes one.
	hierarchical := &placement.Plan{Subgroups: []placement.SubgroupPlan{{}}}
	for _, tt := range []struct {
		name      string
		key       gang.Key
		plan      *placement.Plan
		wantNodes []string
		wantHeld  map[string]capacity.Amounts
	}{
		{"a flat gang's members are alike", key("flat"), &placement.Plan{}, []string{"n1", "n2"}, map[string]capacity.Amounts{"n2": gpus(8)}},
		{"a segmented gang's slot is its member's alone", key("seg"), hierarchical, nil, map[string]capacity.Amounts{"n1": gpus(8), "n2": gpus(8)}},
		{"so is a composite's, whatever its planner reports", gang.Key{API: gang.Composite, Namespace: "ns", Name: "c"}, &placement.Plan{}, nil,
			map[string]capacity.Amounts{"n1": gpus(8), "n2": gpus(8)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := newTestLedger()
			l.HoldPlan(tt.key, []Slot{slot("a", "n1", 8), slot("b", "n2", 8)}, t0.Add(time.Minute), tt.plan, 1)
			nodes, ok := l.Reservations.PlanSlots(tt.key, "x", gpus(8))
			require.True(t, ok)
			require.Equal(t, tt.wantNodes, nodes)
			l.Reservations.Reserve(tt.key, "x", "n1", gpus(8))
			require.Equal(t, tt.wantHeld, l.HeldByOthers(key("other"), QueueOrder{}))
		})
	}
}

func TestReserveTakesOneSlotEach(t *testing.T) {
	l, _ := newTestLedger()
	k := key("job")
	l.HoldPlan(k, []Slot{slot("a", "n1", 8), slot("b", "n2", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	require.Equal(t, map[string]capacity.Amounts{"n1": gpus(8), "n2": gpus(8)}, l.HeldByOthers(key("other"), QueueOrder{}))

	// A recreated member the plan did not name takes the slot on its node.
	l.Reservations.Reserve(k, "x", "n2", gpus(8))
	require.Equal(t, map[string]capacity.Amounts{"n1": gpus(8)}, l.HeldByOthers(key("other"), QueueOrder{}))
	l.Reservations.Reserve(k, "a", "n1", gpus(8))
	require.Nil(t, l.HeldByOthers(key("other"), QueueOrder{}), "the held plan never holds more than the members still to come")
	require.Equal(t, []types.UID{"a", "x"}, l.Reservations.ReservedUIDs(k))
	require.Equal(t, []string{"n1", "n2"}, l.Reservations.InFlightNodes(k))
	require.Equal(t, []gang.Key{k}, l.Reservations.InFlightOn("n2"))
	require.Empty(t, l.Reservations.InFlightOn("n9"))
	placing, reserved := l.Reservations.Placing()
	require.Equal(t, 1, placing)
	require.Equal(t, 2, reserved)
}

func TestFailBacksOffDoubling(t *testing.T) {
	base, max := time.Second, 10*time.Second
	for _, tt := range []struct {
		name     string
		penalize []bool
		want     []time.Duration
	}{
		{name: "doubles up to the maximum", penalize: []bool{true, true, true, true, true, true}, want: []time.Duration{1, 2, 4, 8, 10, 10}},
		{name: "an unpenalized failure retries at once and does not count", penalize: []bool{true, false, true}, want: []time.Duration{1, 0, 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, c := newTestLedger()
			k := key("job")
			for i, p := range tt.penalize {
				l.HoldPlan(k, nil, c.Now().Add(time.Minute), &placement.Plan{}, 1)
				_, backoff, ok := l.Reservations.Fail(k, "why", p, base, max)
				require.True(t, ok)
				require.Equal(t, tt.want[i]*time.Second, backoff, "failure %d", i)
				until, reason, backingOff := l.Reservations.Backoff(k)
				require.Equal(t, backoff > 0, backingOff)
				if backingOff {
					require.Equal(t, c.Now().Add(backoff), until)
					require.Equal(t, "why", reason)
				}
				c.Step(backoff)
				_, _, backingOff = l.Reservations.Backoff(k)
				require.False(t, backingOff, "the backoff ends on time")
			}
		})
	}
}

func TestFailEndsOneAttemptOnce(t *testing.T) {
	l, _ := newTestLedger()
	k := key("job")
	_, _, ok := l.Reservations.Fail(k, "why", true, time.Second, time.Minute)
	require.False(t, ok, "no attempt in flight")

	l.Reservations.Reserve(k, "old", "n0", gpus(8)) // reserved before this attempt
	l.HoldPlan(k, []Slot{slot("b", "n2", 8), slot("a", "n1", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	l.Reservations.Reserve(k, "b", "n2", gpus(8))
	l.Reservations.Reserve(k, "a", "n1", gpus(8))
	members, _, ok := l.Reservations.Fail(k, "why", true, time.Second, time.Minute)
	require.True(t, ok)
	require.Equal(t, []types.UID{"a", "b"}, members, "the failed attempt's members, in UID order")
	_, _, ok = l.Reservations.Fail(k, "again", true, time.Second, time.Minute)
	require.False(t, ok, "a second call for the same attempt changes nothing")
	_, reason, _ := l.Reservations.Backoff(k)
	require.Equal(t, "why", reason)

	require.NotContains(t, l.Reservations.ReservedBy(k), types.UID("a"), "a failed attempt's reservations end with it: no census counts them")
	require.Contains(t, l.Reservations.ReservedBy(k), types.UID("old"), "a reservation of an earlier attempt is not the failed attempt's")
	_, inFlight, released := l.Reservations.Unreserve("a")
	require.False(t, inFlight, "news about an abandoned attempt changes nothing")
	require.False(t, released)
}

func TestSucceedResetsFailuresAndAdmits(t *testing.T) {
	l, _ := newTestLedger()
	k := key("job")
	for range 3 {
		l.HoldPlan(k, nil, t0.Add(time.Minute), &placement.Plan{}, 1)
		l.Reservations.Fail(k, "why", true, time.Second, time.Minute)
	}
	l.HoldPlan(k, []Slot{slot("a", "n1", 8)}, t0.Add(time.Minute), &placement.Plan{Summary: "n1"}, 1)
	l.Reservations.Reserve(k, "a", "n1", gpus(8))
	members, done, ok := l.Succeed(k)
	require.True(t, ok)
	require.Equal(t, []types.UID{"a"}, members)
	require.Equal(t, "n1", done.Summary)
	require.True(t, l.Reservations.Admitted(k))
	require.Equal(t, []gang.Key{k}, l.Reservations.AdmittedKeys())
	_, _, ok = l.Succeed(k)
	require.False(t, ok, "no attempt in flight any more")

	l.HoldPlan(k, nil, t0.Add(time.Minute), &placement.Plan{}, 1)
	_, backoff, _ := l.Reservations.Fail(k, "why", true, time.Second, time.Minute)
	require.Equal(t, time.Second, backoff, "success resets the doubling")
}

func TestUnreserve(t *testing.T) {
	for _, tt := range []struct {
		name         string
		admit        bool
		end          bool // the attempt ends before the member unreserves
		uid          types.UID
		wantInFlight bool
		wantReleased bool
	}{
		{name: "a member of the attempt in flight", uid: "a", wantInFlight: true},
		{name: "a member let go with its admitted gang", admit: true, uid: "a", wantReleased: true},
		{name: "a member of an ended attempt of a gang not admitted", end: true, uid: "a"},
		{name: "a pod the ledger never reserved", uid: "x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := newTestLedger()
			k := key("job")
			l.HoldPlan(k, []Slot{slot("a", "n1", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
			l.Reservations.Reserve(k, "a", "n1", gpus(8))
			switch {
			case tt.admit:
				l.Succeed(k)
			case tt.end:
				l.Reservations.Fail(k, "why", false, 0, 0)
			}
			_, inFlight, released := l.Reservations.Unreserve(tt.uid)
			require.Equal(t, tt.wantInFlight, inFlight)
			require.Equal(t, tt.wantReleased, released)
			require.NotContains(t, l.Reservations.ReservedBy(k), tt.uid)
		})
	}
}

func TestDeadline(t *testing.T) {
	l, c := newTestLedger()
	k := key("job")
	_, ok := l.Reservations.Remaining(k)
	require.False(t, ok)
	l.HoldPlan(k, []Slot{slot("a", "n1", 8)}, t0.Add(30*time.Second), &placement.Plan{}, 1)
	left, ok := l.Reservations.Remaining(k)
	require.True(t, ok)
	require.Equal(t, 30*time.Second, left)
	require.False(t, l.Reservations.Expired(k))
	c.Step(30 * time.Second)
	_, ok = l.Reservations.Remaining(k)
	require.False(t, ok)
	require.True(t, l.Reservations.Expired(k))
	require.Nil(t, l.HeldByOthers(key("other"), QueueOrder{}), "an expired held plan holds nothing")
	placing, _ := l.Reservations.Placing()
	require.Zero(t, placing)
}

func TestDropAdmissionOnlyWithoutReservations(t *testing.T) {
	l, _ := newTestLedger()
	k := key("job")
	l.HoldPlan(k, []Slot{slot("a", "n1", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	l.Reservations.Reserve(k, "a", "n1", gpus(8))
	l.Succeed(k)
	l.Reservations.DropAdmission(k)
	require.True(t, l.Reservations.Admitted(k), "a member still holds a node")
	l.Reservations.Unreserve("a")
	l.Reservations.DropAdmission(k)
	require.False(t, l.Reservations.Admitted(k))
}

// A reservation is found by the member's UID under the unit it was made
// under, whatever unit the pod would belong to now: a composite above its
// PodGroup deleted mid-attempt leaves the pod no unit to recompute.
func TestUnreserveFindsTheUnitByUID(t *testing.T) {
	l, _ := newTestLedger()
	root, leaf := gang.Key{API: gang.Composite, Namespace: "ns", Name: "root"}, gang.Key{API: gang.Native, Namespace: "ns", Name: "leaf"}
	l.HoldPlan(root, []Slot{slot("a", "n1", 8), slot("b", "n2", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	l.Reservations.Reserve(root, "a", "n1", gpus(8))
	unit, ok := l.Reservations.ReservedUnder("a")
	require.True(t, ok)
	require.Equal(t, root, unit)

	unit, inFlight, released := l.Reservations.Unreserve("a")
	require.Equal(t, root, unit, "the unit the reservation was made under")
	require.True(t, inFlight, "the root's attempt fails as a whole")
	require.False(t, released)
	require.Empty(t, l.Reservations.ReservedBy(root))
	_, ok = l.Reservations.ReservedUnder("a")
	require.False(t, ok)

	// A member counts under one unit at a time.
	l.Reservations.Reserve(root, "b", "n2", gpus(8))
	l.Reservations.Reserve(leaf, "b", "n2", gpus(8))
	require.Empty(t, l.Reservations.ReservedBy(root))
	require.Contains(t, l.Reservations.ReservedBy(leaf), types.UID("b"))

	// Forgetting a gang forgets where its members reserved.
	l.ForgetGang(leaf)
	_, ok = l.Reservations.ReservedUnder("b")
	require.False(t, ok)
}

// Holders names every unit that holds something for a pod: a reservation,
// a slot of its live held plan, a place of the head hold.
func TestHolders(t *testing.T) {
	l, _ := newTestLedger()
	reserving, planned, head := key("reserving"), key("planned"), key("head")
	l.HoldPlan(reserving, []Slot{slot("r", "n1", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	l.Reservations.Reserve(reserving, "r", "n1", gpus(8))
	l.HoldPlan(planned, []Slot{slot("p", "n2", 8)}, t0.Add(time.Minute), &placement.Plan{}, 1)
	holds, _ := l.Head.Take(head, QueueOrder{}, []Slot{slot("h", "n3", 8)}, time.Minute)
	require.True(t, holds)

	require.Equal(t, []gang.Key{head, planned, reserving}, l.Holders([]types.UID{"r", "p", "h", "other"}))
	require.Empty(t, l.Holders([]types.UID{"other"}))
}
