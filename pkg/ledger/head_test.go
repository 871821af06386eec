package ledger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

// orders places gangs in the queue: first before second before third.
var (
	first  = QueueOrder{Priority: 10, Created: t0, Group: "pg/ns/first"}
	second = QueueOrder{Priority: 0, Created: t0, Group: "pg/ns/second"}
	third  = QueueOrder{Priority: 0, Created: t0.Add(time.Minute), Group: "pg/ns/third"}
)

const turnLength = 30 * time.Second

// TestHeadTurnThatRanOutYields is the bound on the head hold: a turn that
// ran out is never renewed, and its gang yields for as long as it held
// before it may hold again, whatever comes first once the turn's time is
// up: the timer that ends it, the gang's own next attempt, another gang, or
// the gang's members leaving.
func TestHeadTurnThatRanOutYields(t *testing.T) {
	a, b := key("a"), key("b")
	end := t0.Add(turnLength)
	for _, tt := range []struct {
		name string
		// gap is how long after the turn's end the first event comes.
		gap time.Duration
		// first is what happens then, before the turn's timer calls
		// EndTurn; nil when the timer comes first.
		first func(t *testing.T, l *Ledger)
	}{
		{name: "the timer comes first, on time"},
		{name: "the timer comes first, late", gap: 5 * time.Millisecond},
		{name: "the gang's next attempt comes first", gap: time.Millisecond, first: func(t *testing.T, l *Ledger) {
			holds, _ := l.Head.Take(a, second, []Slot{slot("a-0", "n1", 8)}, turnLength)
			require.False(t, holds, "a turn that ran out must not be renewed")
		}},
		{name: "another gang comes first", gap: time.Millisecond, first: func(t *testing.T, l *Ledger) {
			holds, _ := l.Head.Take(b, third, []Slot{slot("b-0", "n2", 8)}, turnLength)
			require.True(t, holds, "the capacity goes to the gangs behind")
		}},
		{name: "the gang's members leave first", gap: time.Millisecond, first: func(t *testing.T, l *Ledger) {
			l.Idle(a)
		}},
		{name: "a whole plan comes first", gap: time.Millisecond, first: func(t *testing.T, l *Ledger) {
			require.False(t, l.HoldPlan(a, nil, end.Add(time.Minute), &placement.Plan{}, 1), "a turn that ran out is not filled")
			l.Reservations.Fail(a, "why", false, 0, 0)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, c := newTestLedger()
			holds, since := l.Head.Take(a, second, []Slot{slot("a-0", "n1", 8)}, turnLength)
			require.True(t, holds)
			require.Equal(t, t0, since)

			c.SetTime(end.Add(tt.gap))
			if tt.first != nil {
				tt.first(t, l)
			}
			yield, ok := l.Head.EndTurn(a, since)
			require.True(t, ok, "the turn that ran out is reported")
			require.Equal(t, turnLength, yield, "the gang yields for as long as it held")
			_, ok = l.Head.EndTurn(a, since)
			require.False(t, ok, "once")
			holds, _ = l.Head.Take(a, first, []Slot{slot("a-0", "n1", 8)}, turnLength)
			require.False(t, holds, "a gang whose turn ran out yields before it holds again, even first in the queue")

			c.SetTime(end.Add(turnLength - time.Nanosecond))
			holds, _ = l.Head.Take(a, first, []Slot{slot("a-0", "n1", 8)}, turnLength)
			require.False(t, holds, "the yield lasts as long as the turn")
			c.SetTime(end.Add(turnLength))
			holds, since = l.Head.Take(a, first, []Slot{slot("a-0", "n1", 8)}, turnLength)
			require.True(t, holds, "the yield runs from the turn's end, however late it was noticed; then the gang may hold again")
			require.Equal(t, end.Add(turnLength), since, "with a turn of its own")
		})
	}
}

func TestHeadTakeFollowsQueueOrder(t *testing.T) {
	a, b, x := key("a"), key("b"), key("x")
	l, c := newTestLedger()
	holds, since := l.Head.Take(b, second, []Slot{slot("b-0", "n1", 8)}, turnLength)
	require.True(t, holds)

	c.Step(10 * time.Second)
	holds, again := l.Head.Take(b, second, []Slot{slot("b-0", "n1", 8), slot("b-1", "n2", 8)}, turnLength)
	require.True(t, holds, "the head keeps its turn")
	require.True(t, again.IsZero(), "no new turn starts")
	require.Equal(t, map[string]capacity.Amounts{"n1": gpus(8), "n2": gpus(8)}, l.HeldByOthers(x, third), "what freed up joins the hold")

	holds, _ = l.Head.Take(x, third, []Slot{slot("x-0", "n3", 8)}, turnLength)
	require.False(t, holds, "a gang behind the head does not hold")

	for _, tt := range []struct {
		name  string
		self  string
		order QueueOrder
		want  map[string]capacity.Amounts
	}{
		{name: "a pod behind the head stays out of its hold", self: "x", order: third, want: map[string]capacity.Amounts{"n1": gpus(8), "n2": gpus(8)}},
		{name: "the head's own members use it", self: "b", order: second},
		{name: "a pod before the head is not held back", self: "x", order: first},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, l.HeldByOthers(key(tt.self), tt.order))
		})
	}

	c.Step(10 * time.Second)
	holds, _ = l.Head.Take(a, first, []Slot{slot("a-0", "n3", 8)}, turnLength)
	require.True(t, holds, "a gang before the head takes its place")
	holder, _ := l.Head.Holder()
	require.Equal(t, a, holder)
	_, ok := l.Head.EndTurn(b, since)
	require.False(t, ok, "a head that lost its place to an earlier gang does not yield")

	c.Step(turnLength - 10*time.Second)
	_, heads := l.Head.Holder()
	require.True(t, heads, "a turn is timed from its own start")
	c.Step(10 * time.Second)
	_, heads = l.Head.Holder()
	require.False(t, heads, "and lasts at most its length")
}

func TestWholePlanEndsTheHeadTurn(t *testing.T) {
	a := key("a")
	l, c := newTestLedger()
	_, since := l.Head.Take(a, first, []Slot{slot("a-0", "n1", 8)}, turnLength)
	c.Step(time.Second)
	require.True(t, l.HoldPlan(a, []Slot{slot("a-0", "n1", 8), slot("a-1", "n2", 8)}, c.Now().Add(time.Minute), &placement.Plan{}, 1))
	_, heads := l.Head.Holder()
	require.False(t, heads)
	_, ok := l.Head.EndTurn(a, since)
	require.False(t, ok, "a gang that started does not yield")
	require.Equal(t, map[string]capacity.Amounts{"n1": gpus(8), "n2": gpus(8)}, l.HeldByOthers(key("x"), third), "its held plan holds what the head hold did, and more")
}

func TestEndTurnBeforeTheTurnRanOut(t *testing.T) {
	a := key("a")
	l, c := newTestLedger()
	_, since := l.Head.Take(a, first, []Slot{slot("a-0", "n1", 8)}, turnLength)
	c.Step(10 * time.Second)
	yield, ok := l.Head.EndTurn(a, since)
	require.True(t, ok)
	require.Equal(t, turnLength, yield)
	c.Step(turnLength - time.Nanosecond)
	holds, _ := l.Head.Take(a, first, nil, turnLength)
	require.False(t, holds, "the yield runs from when the turn ended")
	c.Step(time.Nanosecond)
	holds, _ = l.Head.Take(a, first, nil, turnLength)
	require.True(t, holds)
}

// TestHeadWaitingPlacesAreHeldNotIdle: the places the head waits for are
// kept from the gangs behind it like its free ones, but they are not idle
// capacity, so Held (the held-capacity gauge) leaves them out.
func TestHeadWaitingPlacesAreHeldNotIdle(t *testing.T) {
	a, b := key("a"), key("b")
	l, _ := newTestLedger()
	waiting := slot("a-1", "n2", 8)
	waiting.Waiting = true
	holds, _ := l.Head.Take(a, second, []Slot{slot("a-0", "n1", 8), waiting}, turnLength)
	require.True(t, holds)

	held := l.HeldByOthers(b, third)
	require.Equal(t, gpus(8), held["n1"], "the free place is held from the gangs behind")
	require.Equal(t, gpus(8), held["n2"], "so is the place the head waits for")
	require.Nil(t, l.HeldByOthers(b, first), "a gang before the head sees nothing held")
	require.Nil(t, l.HeldByOthers(a, second), "nor does the head itself")
	require.Equal(t, gpus(8), l.Held(), "only the free place is held idle")
}
