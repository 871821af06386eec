package preempt

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/ledger"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

const gpu = v1.ResourceName("nvidia.com/gpu")

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func TestLongestGrace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pods  []*v1.Pod
		grace time.Duration
	}{
		{name: "no pods", grace: 0},
		{name: "the API's default", pods: []*v1.Pod{st.MakePod().Obj()}, grace: 30 * time.Second},
		{name: "the longest wins", pods: []*v1.Pod{
			st.MakePod().TerminationGracePeriodSeconds(5).Obj(),
			st.MakePod().TerminationGracePeriodSeconds(120).Obj(),
			st.MakePod().Obj(),
		}, grace: 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.grace, longestGrace(tc.pods))
		})
	}
}

func TestCreatedAt(t *testing.T) {
	at := func(d time.Duration) *v1.Pod {
		p := st.MakePod().Obj()
		p.CreationTimestamp = metav1.NewTime(t0.Add(d))
		return p
	}
	members := []*v1.Pod{at(time.Minute), at(0), at(2 * time.Minute)}
	for _, tc := range []struct {
		name string
		spec *gang.Spec
		want time.Time
	}{
		{name: "a plain pod waits from its earliest member", want: t0},
		{name: "a gang created earlier waits from its first member", spec: &gang.Spec{Created: t0.Add(-time.Hour)}, want: t0},
		{name: "a replacement of a running gang waits from its own creation", spec: &gang.Spec{Created: t0.Add(time.Hour)}, want: t0.Add(time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, createdAt(&Preemptor{Spec: tc.spec, Members: members}))
		})
	}
}

func TestPreemptibleNodes(t *testing.T) {
	nodes := []fwk.NodeInfo{nodeInfo("fits"), nodeInfo("full"), nodeInfo("held"), nodeInfo("tainted"), nodeInfo("unresolvable")}
	statuses := framework.NewDefaultNodeToStatus()
	statuses.Set("full", fwk.NewStatus(fwk.Unschedulable, "Insufficient nvidia.com/gpu").WithPlugin("NodeResourcesFit"))
	statuses.Set("held", fwk.NewStatus(fwk.Unschedulable, "held").WithPlugin("Coscheduling"))
	statuses.Set("tainted", fwk.NewStatus(fwk.Unschedulable, "taint").WithPlugin("TaintToleration"))
	statuses.Set("unresolvable", fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "no").WithPlugin("NodeResourcesFit"))
	statuses.SetAbsentNodesStatus(fwk.NewStatus(fwk.Success))
	require.Equal(t, []bool{true, true, true, false, false}, preemptibleNodes(nodes, statuses, "Coscheduling"))
}

// fakeNominator answers NominatedPodsForNode from a map.
type fakeNominator map[string][]*v1.Pod

func (n fakeNominator) NominatedPodsForNode(node string) []fwk.PodInfo {
	var out []fwk.PodInfo
	for _, p := range n[node] {
		pi, _ := framework.NewPodInfo(p)
		out = append(out, pi)
	}
	return out
}

func TestNominatedRoom(t *testing.T) {
	plain := func(name string, prio int32, gpus string) *v1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Priority(prio).Req(map[v1.ResourceName]string{gpu: gpus}).Obj()
	}
	member := plain("member", 100, "8")
	member.Labels = map[string]string{scheduling.PodGroupLabel: "g"}
	n := fakeNominator{"node-a": {plain("high", 100, "4"), plain("low", 1, "8"), member, plain("self", 100, "2"), plain("equal", 50, "1")}}
	for _, tc := range []struct {
		name string
		node string
		skip string
		want capacity.Amounts
	}{
		{name: "plain pods of at least the priority count", node: "node-a", want: capacity.Amounts{gpu: 7, v1.ResourcePods: 3}},
		{name: "the preemptor's own nomination is its room", node: "node-a", skip: ledger.PodOwner(plain("self", 100, "2")), want: capacity.Amounts{gpu: 5, v1.ResourcePods: 2}},
		{name: "nothing nominated", node: "node-b", want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NominatedRoom(n, tc.node, 50, tc.skip)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("room (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSubtreeLeaves(t *testing.T) {
	leaf := func(name string) gang.Node {
		return gang.Node{Key: gang.Key{Namespace: "ns", Name: name}, Spec: &gang.Spec{}}
	}
	tree := &gang.Tree{Nodes: []gang.Node{
		{Key: gang.Key{API: gang.Composite, Namespace: "ns", Name: "root"}, Children: []int{1, 4}},
		{Key: gang.Key{API: gang.Composite, Namespace: "ns", Name: "mid"}, Children: []int{2, 3}},
		leaf("a"), leaf("b"), leaf("c"),
	}}
	key := func(name string) gang.Key { return gang.Key{Namespace: "ns", Name: name} }
	require.Equal(t, []gang.Key{key("a"), key("b"), key("c")}, subtreeLeaves(tree, 0))
	require.Equal(t, []gang.Key{key("a"), key("b")}, subtreeLeaves(tree, 1))
	require.Equal(t, []gang.Key{key("c")}, subtreeLeaves(tree, 4))
}

func TestAddBudgets(t *testing.T) {
	pdb := func(ns, name string, allowed int32, sel *metav1.LabelSelector) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: sel},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
		}
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, b := range []*policyv1.PodDisruptionBudget{
		pdb("a", "web", 1, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}),
		pdb("a", "everything", -2, &metav1.LabelSelector{}),
		pdb("a", "nothing", 3, nil),
		pdb("b", "web", 5, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}),
	} {
		require.NoError(t, indexer.Add(b))
	}
	pod := func(ns, name, app string) *v1.Pod {
		return st.MakePod().Namespace(ns).Name(name).Label("app", app).Obj()
	}
	cands := &candidates{pods: [][]*v1.Pod{
		{pod("b", "web-0", "web"), pod("b", "db-0", "db")},
		{pod("a", "web-1", "web")},
	}}
	req := &preemption.Request{Units: []preemption.Unit{{Pods: make([]preemption.Pod, 2)}, {Pods: make([]preemption.Pod, 1)}}}
	pr := New(Config{PDBs: policylisters.NewPodDisruptionBudgetLister(indexer)})
	pr.addBudgets(req, cands)

	// Namespaces in order, and budgets by name within each: a/everything
	// (allowed never below 0), a/web, b/web. The null selector covers no
	// pod.
	require.Equal(t, []preemption.PDB{{Name: "a/everything", Allowed: 0}, {Name: "a/web", Allowed: 1}, {Name: "b/web", Allowed: 5}}, req.PDBs)
	require.Equal(t, []int{2}, req.Units[0].Pods[0].PDBs)
	require.Empty(t, req.Units[0].Pods[1].PDBs)
	require.Equal(t, []int{0, 1}, req.Units[1].Pods[0].PDBs)

	// Without a lister, nothing is budgeted.
	req = &preemption.Request{Units: []preemption.Unit{{Pods: make([]preemption.Pod, 2)}, {Pods: make([]preemption.Pod, 1)}}}
	New(Config{}).addBudgets(req, cands)
	require.Empty(t, req.PDBs)
}

func TestEvictPod(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	victim := st.MakePod().Namespace("ns").Name("victim").UID("victim-uid").Node("node-a").Obj()
	cs := fake.NewClientset(victim)
	require.NoError(t, evictPod(ctx, cs, victim, "preempted by ns/urgent"))
	_, err := cs.CoreV1().Pods("ns").Get(ctx, "victim", metav1.GetOptions{})
	require.Error(t, err, "the victim is deleted")
	var patched bool
	for _, a := range cs.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			patched = true
		}
	}
	require.True(t, patched, "the victim is marked %s first", v1.DisruptionTarget)

	// A victim already gone is left alone.
	require.NoError(t, evictPod(ctx, fake.NewClientset(), victim, "preempted by ns/urgent"))
}

func nodeInfo(name string) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(st.MakeNode().Name(name).Obj())
	return ni
}
