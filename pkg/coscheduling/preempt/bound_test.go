package preempt

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
)

// fakeGangs knows gangs by their PodGroup label, with the members given;
// their PodGroups are gone, so members alone count.
type fakeGangs struct {
	members map[gang.Key][]*v1.Pod
}

func (f fakeGangs) UnitOf(pod *v1.Pod) (gang.Key, bool) { return gang.Of(pod) }
func (f fakeGangs) OwnerOf(pod *v1.Pod) string {
	if key, ok := gang.Of(pod); ok {
		return ledger.GangOwner(key)
	}
	return ledger.PodOwner(pod)
}
func (f fakeGangs) Lookup(gang.Key) (*gang.Spec, bool)      { return nil, false }
func (f fakeGangs) Members(key gang.Key) ([]*v1.Pod, error) { return f.members[key], nil }
func (f fakeGangs) Census(_ gang.Key, members []*v1.Pod) gang.Census {
	return gang.Count(members)
}
func (f fakeGangs) Unit(gang.Key) (gang.Unit, gang.View, error) {
	return nil, nil, errors.New("no PodGroup")
}
func (f fakeGangs) TreeQuorum(gang.Key) (*gang.Tree, []gang.GroupQuorum, bool) {
	return nil, nil, false
}

// boundTimes records what a Reporter observes of preemptors bound.
type boundTimes struct {
	Reporter
	observed []time.Duration
}

func (b *boundTimes) PreemptorBound(d time.Duration) { b.observed = append(b.observed, d) }

func TestPreemptorBound(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	clock := clocktesting.NewFakeClock(t0)
	key := gang.Key{Namespace: "ns", Name: "job"}
	members := make([]*v1.Pod, 3)
	for i := range members {
		members[i] = st.MakePod().Namespace("ns").Name("job-"+string(rune('a'+i))).UID("job-"+string(rune('a'+i))).
			Label(scheduling.PodGroupLabel, "job").Obj()
	}
	plain := st.MakePod().Namespace("ns").Name("urgent").UID("urgent").Obj()
	gangs := fakeGangs{members: map[gang.Key][]*v1.Pod{key: members}}
	preemptions := ledger.NewPreemptions(clock)
	report := &boundTimes{}
	pr := New(Config{Gangs: gangs, Preemptions: preemptions, Reporter: report, Clock: clock, Logger: logger})

	unbound := func(pods ...*v1.Pod) map[types.UID]bool {
		out := map[types.UID]bool{}
		for _, p := range pods {
			out[p.UID] = true
		}
		return out
	}
	preemptions.Start(ledger.GangOwner(key), &ledger.Preemption{Created: t0, Unbound: unbound(members...), MinMember: 2})
	preemptions.Start(ledger.PodOwner(plain), &ledger.Preemption{Created: t0.Add(time.Minute), Unbound: unbound(plain)})
	clock.Step(5 * time.Minute)

	// A gang counts as bound once minMember of its members are.
	bind := func(p *v1.Pod) { p.Spec.NodeName = "node-a"; pr.PreemptorBound(p) }
	bind(members[0])
	require.Empty(t, report.observed, "one member of minMember 2 is bound")
	bind(members[1])
	require.Equal(t, []time.Duration{5 * time.Minute}, report.observed)
	require.False(t, preemptions.End(ledger.GangOwner(key)), "the gang's record is gone")
	bind(members[2])
	require.Len(t, report.observed, 1, "a preemptor is observed once")

	// A plain pod is bound when it is.
	bind(plain)
	require.Equal(t, []time.Duration{5 * time.Minute, 4 * time.Minute}, report.observed)
}
