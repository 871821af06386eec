package coscheduling

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// consolidationArgs are the test's plugin args with consolidation on.
func consolidationArgs(edit func(*config.ConsolidationArgs)) config.CoschedulingArgs {
	args := defaultTestArgs()
	args.Consolidation = config.ConsolidationArgs{Enabled: true, WaitingFor: 2 * time.Minute, MaxEvictionsPerHour: 10,
		Cooldown: 30 * time.Minute, MinRunTime: 10 * time.Minute}
	if edit != nil {
		edit(&args.Consolidation)
	}
	return args
}

// cliqueCluster is the 8-node fabric of topology_test.go (each leaf one
// NVLink clique) with a one-node gang of priority 0 on every node but
// free: those on clique c-s0-l0 are mov-0 and mov-1, the others fixed-*.
// movable edits the PodGroups of mov-0 and mov-1, and of no other.
func cliqueCluster(started time.Time, movable func(*gangtest.PodGroupWrapper), free ...string) (nodes []*v1.Node, running []*v1.Pod, pgs []*v1alpha1.PodGroup) {
	nodes = fabric()
	mov := 0
	for _, n := range nodes {
		if slices.Contains(free, n.Name) {
			continue
		}
		pg := gangtest.MakePodGroup("fixed-"+n.Name, testNS).MinMember(1).Created(t0)
		if strings.HasPrefix(n.Name, "s0-l0-") {
			pg = gangtest.MakePodGroup("mov-"+string(rune('0'+mov)), testNS).MinMember(1).Created(t0)
			mov++
			if movable != nil {
				movable(pg)
			}
		}
		running = append(running, runningGang(pg.Name, 0, started, n.Name)...)
		pgs = append(pgs, pg.Obj())
	}
	return nodes, running, pgs
}

// bigGang is a pending 2-node gang of priority 0 that requires one NVLink
// clique, created at created.
func bigGang(created time.Time) ([]*v1.Pod, *v1alpha1.PodGroup) {
	pods := urgent("big", 2, 0)
	for _, p := range pods {
		p.Spec.PriorityClassName = ""
	}
	return pods, gangtest.MakePodGroup("big", testNS).MinMember(2).Created(created).
		Annotation(scheduling.AnnotationTopologyRequired, cliqueLabel).Obj()
}

func markMovable(pg *gangtest.PodGroupWrapper) { pg.Annotation(scheduling.AnnotationMovable, "true") }

func TestConsolidationDecides(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) // the test environment's clock
	twoFree := []string{"s0-l1-n1", "s1-l0-n1"}
	tests := []struct {
		name    string
		args    config.CoschedulingArgs
		started time.Time
		created time.Time
		movable func(*gangtest.PodGroupWrapper)
		prio    int32 // of the movable gangs
		free    []string
		// budget, if set, covers mov-0 and allows no disruption.
		budget bool
		// wantMoved are the pods evicted, sorted; none means nothing moves.
		wantMoved []string
	}{
		{name: "moves both movable gangs out of the clique, each to a free node elsewhere", args: consolidationArgs(nil),
			movable: markMovable, free: twoFree, wantMoved: []string{"mov-0-0", "mov-1-0"}},
		{name: "a priority class named movable counts as the annotation",
			args: consolidationArgs(func(c *config.ConsolidationArgs) { c.MovablePriorityClasses = []string{"batch"} }),
			free: twoFree, wantMoved: []string{"mov-0-0", "mov-1-0"}},
		{name: "off by default", args: defaultTestArgs(), movable: markMovable, free: twoFree},
		{name: "the moved gangs would not fit elsewhere", args: consolidationArgs(nil), movable: markMovable},
		{name: "only one of the two would fit elsewhere", args: consolidationArgs(nil), movable: markMovable, free: []string{"s1-l0-n1"}},
		{name: "gangs that did not opt in stay", args: consolidationArgs(nil), free: twoFree},
		{name: "a malformed movable annotation is no opt-in", args: consolidationArgs(nil), free: twoFree,
			movable: func(pg *gangtest.PodGroupWrapper) { pg.Annotation(scheduling.AnnotationMovable, "yes") }},
		{name: "the gang has not waited long enough", args: consolidationArgs(nil), movable: markMovable, free: twoFree,
			created: now.Add(-90 * time.Second)},
		{name: "gangs that started less than minRunTime ago stay", args: consolidationArgs(nil), movable: markMovable, free: twoFree,
			started: now.Add(-5 * time.Minute)},
		{name: "gangs of higher priority stay", args: consolidationArgs(nil), movable: markMovable, free: twoFree, prio: 10},
		{name: "a PodDisruptionBudget that allows no disruption keeps its gang", args: consolidationArgs(nil), movable: markMovable,
			free: twoFree, budget: true},
		{name: "the hourly budget is too small for two gangs",
			args:    consolidationArgs(func(c *config.ConsolidationArgs) { c.MaxEvictionsPerHour = 1 }),
			movable: markMovable, free: twoFree},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started := tt.started
			if started.IsZero() {
				started = t0
			}
			created := tt.created
			if created.IsZero() {
				created = t0.Add(time.Hour)
			}
			nodes, running, pgs := cliqueCluster(started, tt.movable, tt.free...)
			for _, p := range running {
				if strings.HasPrefix(p.Name, "mov-") {
					p.Spec.PriorityClassName = "batch"
					p.Spec.Priority = &tt.prio
				}
			}
			big, pg := bigGang(created)
			opts := []envOption{withTopology(t), withArgs(tt.args)}
			if tt.budget {
				opts = append(opts, withObjects(&policyv1.PodDisruptionBudget{
					ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "keep-mov-0"},
					Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
						Selector: &metav1.LabelSelector{MatchLabels: map[string]string{scheduling.PodGroupLabel: "mov-0"}}},
					Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0},
				}))
			}
			env := newTestEnv(t, nodes, append(running, big...), append(pgs, pg), opts...)
			if tt.budget {
				_, err := env.Informers.Policy().V1().PodDisruptionBudgets().Lister().PodDisruptionBudgets(testNS).Get("keep-mov-0")
				require.NoError(t, err, "the plugin sees the budget")
			}
			moves, err := testutil.GetCounterMetricValue(consolidations)
			require.NoError(t, err)
			movedGangs, err := testutil.GetCounterMetricValue(consolidatedGangs)
			require.NoError(t, err)
			env.syncWatch()

			res, status := env.attempt(big[0])
			events := env.recorded()
			afterMoves, err := testutil.GetCounterMetricValue(consolidations)
			require.NoError(t, err)
			afterGangs, err := testutil.GetCounterMetricValue(consolidatedGangs)
			require.NoError(t, err)
			if len(tt.wantMoved) == 0 {
				require.Equal(t, fwk.Unschedulable, status.Code(), "%v", status)
				require.Nil(t, res)
				require.Empty(t, env.deleted())
				require.False(t, hasEvent(events, ReasonMoved, ""), "%v", events)
				require.False(t, hasEvent(events, ReasonConsolidating, ""), "%v", events)
				require.Equal(t, moves, afterMoves)
				require.Equal(t, strings.Contains(tt.name, "would not fit elsewhere") || strings.Contains(tt.name, "only one of the two"),
					hasEvent(events, ReasonNotConsolidated, "moving team-a/mov-0, team-a/mov-1 would free NVLink domain c-s0-l0 for it, but gang team-a/mov-"), "%v", events)
				if !tt.created.IsZero() {
					// Tried again once it has waited waitingFor: 30s on,
					// before its head turn (1m) ends.
					env.activator.Reset()
					env.clock.Step(29 * time.Second)
					require.Never(t, func() bool { return slices.Contains(env.activator.Get(), testNS+"/big-0") },
						200*time.Millisecond, 10*time.Millisecond, "the gang is not tried again before its wait is over")
					env.clock.Step(time.Second)
					require.Eventually(t, func() bool { return slices.Contains(env.activator.Get(), testNS+"/big-0") },
						5*time.Second, 10*time.Millisecond, "the gang is tried again when its wait is over")
				}
				if strings.Contains(tt.name, "malformed") {
					require.True(t, hasEvent(events, scheduling.ReasonInvalidPodGroup, `annotation gpu-gang.x-k8s.io/movable="yes" is not "true" or "false"`), "%v", events)
				}
				return
			}
			require.True(t, status.IsSuccess(), "%v", status)
			require.Equal(t, tt.wantMoved, env.deleted())
			require.Equal(t, moves+1, afterMoves)
			require.Equal(t, movedGangs+float64(len(tt.wantMoved)), afterGangs)
			require.NotNil(t, res)
			require.Equal(t, "s0-l0-n0", res.NominatedNodeName)
			moved := 0
			for _, ev := range events {
				if strings.Contains(ev, " "+ReasonMoved+" moved to free NVLink domain c-s0-l0 for gang team-a/big") {
					moved++
				}
			}
			require.Equal(t, len(tt.wantMoved), moved, "one Moved Event per moved gang: %v", events)
			require.True(t, hasEvent(events, ReasonConsolidating, "moving team-a/mov-0, team-a/mov-1 to free NVLink domain c-s0-l0"), "%v", events)

			// The freed clique is held for the waiting gang, member by
			// member; each moved gang's new place is held for it, on the
			// free nodes outside the clique.
			for i, p := range big {
				got, ok := env.ledger().Reservations.PlanSlots(gang.Key{Namespace: testNS, Name: "big"}, p.UID, capacity.PodAmounts(p))
				require.True(t, ok)
				require.Equal(t, []string{[]string{"s0-l0-n0", "s0-l0-n1"}[i]}, got)
			}
			var newPlaces []string
			for _, p := range podsNamed(running, tt.wantMoved...) {
				got, ok := env.ledger().Reservations.PlanSlots(gang.Key{Namespace: testNS, Name: p.Labels[scheduling.PodGroupLabel]}, p.UID, capacity.PodAmounts(p))
				require.True(t, ok, "a place is held for %s", p.Name)
				newPlaces = append(newPlaces, got...)
			}
			slices.Sort(newPlaces)
			require.Equal(t, tt.free, newPlaces)
		})
	}
}

// Of the cliques a move could free, the one that moves the fewest GPUs is
// freed; between cliques that move as many, the first by path.
func TestConsolidationChoosesTheCliqueMovingFewestGPUs(t *testing.T) {
	nodes := fabric()
	var running []*v1.Pod
	var pgs []*v1alpha1.PodGroup
	place := func(name, node string, movable bool) {
		pg := gangtest.MakePodGroup(name, testNS).MinMember(1).Created(t0)
		if movable {
			markMovable(pg)
		}
		running = append(running, runningGang(name, 0, t0, node)...)
		pgs = append(pgs, pg.Obj())
	}
	// c-s0-l0: two movable gangs, 16 GPUs to move. c-s0-l1 and c-s1-l0:
	// one movable gang and a free node each, 8 GPUs to move. c-s1-l1: full
	// of gangs that stay.
	place("mov-0", "s0-l0-n0", true)
	place("mov-1", "s0-l0-n1", true)
	place("mov-s1l0", "s1-l0-n0", true)
	place("mov-s0l1", "s0-l1-n0", true)
	place("fixed-0", "s1-l1-n0", false)
	place("fixed-1", "s1-l1-n1", false)
	big, pg := bigGang(t0.Add(time.Hour))
	env := newTestEnv(t, nodes, append(running, big...), append(pgs, pg), withTopology(t), withArgs(consolidationArgs(nil)))
	env.syncWatch()

	res, status := env.attempt(big[0])
	require.True(t, status.IsSuccess(), "%v", status)
	require.Equal(t, []string{"mov-s0l1-0"}, env.deleted())
	require.Equal(t, "s0-l1-n0", res.NominatedNodeName)
	events := env.recorded()
	require.True(t, hasEvent(events, ReasonConsolidating, "moving team-a/mov-s0l1 to free NVLink domain c-s0-l1"), "%v", events)
	// It goes to the free node of the other clique, not to its own.
	got, ok := env.ledger().Reservations.PlanSlots(gang.Key{Namespace: testNS, Name: "mov-s0l1"}, "team-a/mov-s0l1-0", capacity.Amounts{gpu: 8})
	require.True(t, ok)
	require.Equal(t, []string{"s1-l0-n1"}, got)
}
