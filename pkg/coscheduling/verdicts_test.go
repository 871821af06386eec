package coscheduling

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/eligibility"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
)

// TestKeptVerdictsFollowNodeChanges changes random nodes between plans, the
// way the scheduler's cache does (a taint comes or goes, a node's GPU
// product label changes, a pod lands, a node object is replaced with the
// same content), and checks after each change that the eligibility and the
// rejections a plan reads with the kept verdicts (eligibility.Runner.FilterKnown) are those a
// fresh Filter pass over every node gives. A kept verdict that outlives its
// node's change fails it. Every other round checks the verdicts against the
// generations the node view lends with its nodes, as a plan does, the
// others against the NodeInfos.
func TestKeptVerdictsFollowNodeChanges(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			nodes, running := randomFleet(r, 48)
			jobs := [][]*v1.Pod{members("job", 2, "4"), members("wide", 2, "8")}
			pgs := []*v1alpha1.PodGroup{
				gangtest.MakePodGroup("job", testNS).MinMember(2).Obj(),
				gangtest.MakePodGroup("wide", testNS).MinMember(2).Obj(),
			}
			env := newTestEnv(t, nodes, append(append(running, jobs[0]...), jobs[1]...), pgs, withShippedProfile(t))
			list, err := env.snapshot.NodeInfos().List()
			require.NoError(t, err)
			sorted := env.pl.core.Snapshot().Live(list, env.pl.core.NodeGeneration(), env.pl.core.LiveNodes)
			used := 0
			for round := range 60 {
				job := jobs[r.IntN(len(jobs))]
				kept, keyed := eligibilityOf(t, env, job, sorted, true, round%2 == 0)
				fresh, _ := eligibilityOf(t, env, job, sorted, false, false)
				require.Empty(t, cmp.Diff(fresh, kept), "round %d (-fresh,+kept)", round)
				if keyed {
					used++
				}
				changeNode(t, r, sorted[r.IntN(len(sorted))], round)
			}
			// The comparison means something only if verdicts were kept.
			require.Equal(t, 60, used, "the shipped profile's GPU members must keep their verdicts")
		})
	}
}

// filterPass is what a plan reads of a template's Filter pass.
type filterPass struct {
	Eligible   []bool
	Rejections map[string]int
}

// eligibilityOf runs PreFilter and Filter for job's templates over sorted,
// with the kept verdicts or without, and reports whether they were keyed;
// lent checks the kept verdicts against the generations the node view lends.
func eligibilityOf(t *testing.T, env *testEnv, job []*v1.Pod, sorted []fwk.NodeInfo, kept, lent bool) ([]filterPass, bool) {
	t.Helper()
	reqs := make([]capacity.Amounts, len(job))
	for i, p := range job {
		reqs[i] = capacity.PodAmounts(p)
	}
	templates, _ := eligibility.TemplatesOf(job, reqs)
	env.pl.core.Eligibility().PreFilter(env.ctx, templates, sorted, ledger.LessonView{})
	keyed := true
	if kept {
		for _, tmpl := range templates {
			_, ok := env.pl.core.Eligibility().Verdicts().KeyOf(tmpl)
			keyed = keyed && ok
		}
		var gens []int64
		if lent {
			cols := []dra.Column{{Name: gpu}}
			var release func()
			_, gens, _, release = env.pl.core.Snapshot().Nodes(env.ctx, sorted, []v1.ResourceName{gpu}, cols, nil, true)
			defer release()
			require.Len(t, gens, len(sorted))
		}
		env.pl.core.Eligibility().FilterKnown(env.ctx, templates, sorted, gens, eligibility.All)
	} else {
		env.pl.core.Eligibility().Filter(env.ctx, templates, sorted, eligibility.All)
	}
	out := make([]filterPass, len(templates))
	for i, tmpl := range templates {
		out[i] = filterPass{Eligible: tmpl.Eligible, Rejections: tmpl.Rejections}
	}
	return out, keyed
}

// changeNode changes ni in place, as the scheduler's cache updates a
// snapshot's NodeInfo: its generation moves.
func changeNode(t *testing.T, r *rand.Rand, node fwk.NodeInfo, round int) {
	t.Helper()
	ni, ok := node.(*framework.NodeInfo)
	require.True(t, ok)
	n := ni.Node().DeepCopy()
	switch r.IntN(4) {
	case 0: // a taint comes or goes
		if len(n.Spec.Taints) > 0 {
			n.Spec.Taints = nil
		} else {
			n.Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}}
		}
		ni.SetNode(n)
	case 1: // another GPU product: GPUFleet judges it anew
		n.Labels[scheduling.LabelCUDARuntimeVersionFull] = []string{"12.4", "11.8"}[r.IntN(2)]
		ni.SetNode(n)
	case 2: // a pod lands
		p := st.MakePod().Namespace("other").Name(fmt.Sprint("land-", round)).UID(fmt.Sprint("land-", round)).
			Node(n.Name).Req(map[v1.ResourceName]string{gpu: "1"}).Obj()
		pi, err := framework.NewPodInfo(p)
		require.NoError(t, err)
		ni.AddPodInfo(pi)
	default: // the same node, a new object
		ni.SetNode(n)
	}
}

// TestVerdictsKeptOnlyForStaticFilters checks that a template that runs a
// Filter plugin reading other nodes (hard topology spread) keeps no
// verdict, and that GPU members of gangs with other GPU requirements keep
// theirs apart.
func TestVerdictsKeptOnlyForStaticFilters(t *testing.T) {
	nodes, _ := benchFleet(8)
	plain := members("plain", 1, "8")
	spread := members("spread", 1, "8")
	spread[0].Spec.TopologySpreadConstraints = []v1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: leafLabel, WhenUnsatisfiable: v1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
	}}
	anyDriver := members("any", 1, "8")
	pgs := []*v1alpha1.PodGroup{
		gangtest.MakePodGroup("plain", testNS).MinMember(1).Obj(),
		gangtest.MakePodGroup("spread", testNS).MinMember(1).Obj(),
		gangtest.MakePodGroup("any", testNS).MinMember(1).Annotation(scheduling.AnnotationUniform, scheduling.UniformNone).Obj(),
	}
	env := newTestEnv(t, nodes, append(append(plain, spread...), anyDriver...), pgs, withShippedProfile(t))
	list, err := env.snapshot.NodeInfos().List()
	require.NoError(t, err)
	keyOf := func(p *v1.Pod) (eligibility.VerdictKey, bool) {
		templates, _ := eligibility.TemplatesOf([]*v1.Pod{p}, []capacity.Amounts{capacity.PodAmounts(p)})
		env.pl.core.Eligibility().PreFilter(env.ctx, templates, list, ledger.LessonView{})
		require.True(t, templates[0].Pending, "%s: %v", p.Name, templates[0].Rejected)
		return env.pl.core.Eligibility().Verdicts().KeyOf(templates[0])
	}
	plainKey, ok := keyOf(plain[0])
	require.True(t, ok, "a plain GPU member keeps its verdicts")
	_, ok = keyOf(spread[0])
	require.False(t, ok, "hard topology spread reads other nodes: no verdict is kept")
	anyKey, ok := keyOf(anyDriver[0])
	require.True(t, ok)
	require.Equal(t, eligibility.FilterSignature(plain[0], capacity.PodAmounts(plain[0])), eligibility.FilterSignature(anyDriver[0], capacity.PodAmounts(anyDriver[0])), "the members differ in their PodGroup only")
	require.NotEqual(t, plainKey, anyKey, "GPUFleet's inputs (the PodGroup's requirements) tell them apart")
}
