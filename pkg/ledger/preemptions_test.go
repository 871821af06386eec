package ledger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

func TestPreemptionRecord(t *testing.T) {
	l, c := newTestLedger()
	p := l.Preemptions
	const owner = "pg/ns/urgent"
	_, waiting := p.AwaitingVictims(owner)
	require.False(t, waiting)
	p.Start(owner, &Preemption{
		Victims: map[types.UID]bool{"v1": true, "v2": true}, Unbound: map[types.UID]bool{"m1": true, "m2": true},
		Created: t0, MinMember: 2, Until: t0.Add(time.Minute),
	})
	n, waiting := p.AwaitingVictims(owner)
	require.True(t, waiting)
	require.Equal(t, 2, n)
	require.Equal(t, map[types.UID]bool{"v1": true, "v2": true}, p.PendingVictims())

	p.VictimGone("v1")
	p.VictimGone("unrelated")
	n, _ = p.AwaitingVictims(owner)
	require.Equal(t, 1, n)
	p.VictimGone("v2")
	_, waiting = p.AwaitingVictims(owner)
	require.False(t, waiting, "every victim is gone")
	require.True(t, p.Preempting(owner), "the room it preempted for is still its own")

	created, minMember, all, ok := p.MemberBound(owner, "m1")
	require.True(t, ok)
	require.Equal(t, t0, created)
	require.EqualValues(t, 2, minMember)
	require.False(t, all)
	_, _, all, _ = p.MemberBound(owner, "m2")
	require.True(t, all)
	require.True(t, p.End(owner))
	require.False(t, p.End(owner), "once")
	_, _, _, ok = p.MemberBound(owner, "m1")
	require.False(t, ok)

	p.Start(owner, &Preemption{Victims: map[types.UID]bool{"v3": true}, Until: c.Now().Add(time.Minute)})
	c.Step(time.Minute)
	_, waiting = p.AwaitingVictims(owner)
	require.False(t, waiting, "past its bound a victim that did not go no longer holds the preemptor back")
	require.False(t, p.Preempting(owner))
	require.Empty(t, p.PendingVictims())
}
