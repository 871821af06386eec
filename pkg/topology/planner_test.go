package topology

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/placement/placementtest"
)

// smallCluster is, with 8 GPUs per node:
//
//	s1: l1: c1 {n1 n2}, c2 {n3 n4}
//	    l2: c3 {n5 n6 n7 n8}, c5 {n13}
//	s2: l3: c4 {n9 n10 n11 n12}
func smallCluster() []*nodeWrapper {
	var ws []*nodeWrapper
	add := func(spine, leaf, clique string, names ...string) {
		for _, n := range names {
			ws = append(ws, makeNode(n).spine(spine).leaf(leaf).clique(clique))
		}
	}
	add("s1", "l1", "c1", "n1", "n2")
	add("s1", "l1", "c2", "n3", "n4")
	add("s1", "l2", "c3", "n5", "n6", "n7", "n8")
	add("s1", "l2", "c5", "n13")
	add("s2", "l3", "c4", "n9", "n10", "n11", "n12")
	return ws
}

// withNode applies f to the node of cluster ws with the given name.
func withNode(ws []*nodeWrapper, name string, f func(*nodeWrapper)) []*nodeWrapper {
	for _, w := range ws {
		if w.n.Name == name {
			f(w)
			return ws
		}
	}
	panic("no node " + name)
}

// eligibleOn marks the named nodes of ws eligible.
func eligibleOn(ws []*nodeWrapper, names ...string) []bool {
	e := make([]bool, len(ws))
	for i, w := range ws {
		for _, n := range names {
			e[i] = e[i] || w.n.Name == n
		}
	}
	return e
}

// nodeNames maps a plan to node names, member by member.
func nodeNames(req *placement.Request, plan *placement.Plan) []string {
	out := make([]string, len(plan.NodeOf))
	for i, n := range plan.NodeOf {
		out[i] = req.Nodes[n].Name
	}
	return out
}

func repeat(name string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = name
	}
	return out
}

func newTestPlanner(t *testing.T) *Planner {
	t.Helper()
	p, err := NewPlanner(nvidiaLevels())
	require.NoError(t, err)
	return p
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name        string
		nodes       []*nodeWrapper
		request     func(r *requestWrapper, ws []*nodeWrapper)
		wantNodes   []string
		wantSummary string
		wantErr     string
	}{
		{
			name: "one node, best fit",
			nodes: withNode(withNode(smallCluster(),
				"n3", func(w *nodeWrapper) { w.freeGPUs(2) }),
				"n6", func(w *nodeWrapper) { w.freeGPUs(5) }),
			request:     func(r *requestWrapper, _ []*nodeWrapper) { r.workers(1, 2) },
			wantNodes:   []string{"n3"},
			wantSummary: "1 pod on node n3",
		},
		{
			name:        "tightest clique that holds the gang",
			nodes:       smallCluster(),
			request:     func(r *requestWrapper, _ []*nodeWrapper) { r.workers(2, 8) },
			wantNodes:   []string{"n1", "n2"},
			wantSummary: "2 pods in NVLink domain c1: 1 NVLink domain, 2 nodes",
		},
		{
			// c3 and c4 hold the gang equally well; c4 lies in the fuller
			// leaf, so l2 stays whole with 5 nodes for a later gang.
			name:        "equal cliques: the one in the fuller leaf",
			nodes:       smallCluster(),
			request:     func(r *requestWrapper, _ []*nodeWrapper) { r.workers(4, 8) },
			wantNodes:   []string{"n9", "n10", "n11", "n12"},
			wantSummary: "4 pods in NVLink domain c4: 1 NVLink domain, 4 nodes",
		},
		{
			// l1 is the tightest leaf but would split the gang over two
			// cliques; of l2 and l3, which keep it in one, l3 fits best.
			name:        "fewer cliques beat best fit, then best fit",
			nodes:       smallCluster(),
			request:     func(r *requestWrapper, _ []*nodeWrapper) { r.workers(4, 8).policy(leafKey, false) },
			wantNodes:   []string{"n9", "n10", "n11", "n12"},
			wantSummary: "4 pods in leaf l3: 1 leaf, 1 NVLink domain, 4 nodes",
		},
		{
			name:    "required level unmet",
			nodes:   smallCluster(),
			request: func(r *requestWrapper, _ []*nodeWrapper) { r.workers(5, 8).policy(cliqueKey, true) },
			wantErr: "4 of 5 members fit: required NVLink domain (nvidia.com/gpu.clique): no NVLink domain holds " +
				"the 5 pods asking cpu=1 nvidia.com/gpu=8; the roomiest, c3, has room for 4",
		},
		{
			name:        "preferred level unmet: one level up",
			nodes:       smallCluster(),
			request:     func(r *requestWrapper, _ []*nodeWrapper) { r.workers(5, 8).policy(cliqueKey, false) },
			wantNodes:   []string{"n5", "n6", "n7", "n8", "n13"},
			wantSummary: "5 pods in leaf l2 (no NVLink domain holds them): 1 leaf, 2 NVLink domains, 5 nodes",
		},
		{
			name:    "cluster too small",
			nodes:   smallCluster(),
			request: func(r *requestWrapper, _ []*nodeWrapper) { r.workers(14, 8) },
			wantErr: "13 of 14 members fit: the cluster has room for 13 of the 14 pods asking cpu=1 nvidia.com/gpu=8",
		},
		{
			name: "whole request vector must fit per node",
			nodes: withNode(withNode(smallCluster(),
				"n1", func(w *nodeWrapper) { w.freeMilliCPU(32000) }),
				"n2", func(w *nodeWrapper) { w.freeMilliCPU(32000) }),
			request: func(r *requestWrapper, _ []*nodeWrapper) {
				r.members(makeMember("a").milliCPU(40000), makeMember("b").milliCPU(40000))
			},
			wantNodes:   []string{"n3", "n4"},
			wantSummary: "2 pods in NVLink domain c2: 1 NVLink domain, 2 nodes",
		},
		{
			name:  "eligibility",
			nodes: smallCluster(),
			request: func(r *requestWrapper, ws []*nodeWrapper) {
				e := eligibleOn(ws, "n4", "n5", "n6", "n9", "n10")
				r.members(makeMember("a").eligible(e), makeMember("b").eligible(e))
			},
			// c3 and c4 have two eligible nodes each and their leaves
			// two; c4's spine has fewer, so c4 wins.
			wantNodes:   []string{"n9", "n10"},
			wantSummary: "2 pods in NVLink domain c4: 1 NVLink domain, 2 nodes",
		},
		{
			name:  "launcher joins the gang's nodes",
			nodes: smallCluster(),
			request: func(r *requestWrapper, _ []*nodeWrapper) {
				r.members(makeMember("launcher").gpus(0).milliCPU(2000)).workers(2, 8)
			},
			wantNodes:   []string{"n1", "n1", "n2"},
			wantSummary: "2 pods in NVLink domain c1: 1 NVLink domain, 2 nodes; 1 pod without accelerators on node n1",
		},
		{
			name: "launcher goes anywhere when the gang's domain is full",
			nodes: withNode(withNode(smallCluster(),
				"n1", func(w *nodeWrapper) { w.freeMilliCPU(1000) }),
				"n2", func(w *nodeWrapper) { w.freeMilliCPU(1000) }),
			request: func(r *requestWrapper, _ []*nodeWrapper) {
				r.workers(2, 8).members(makeMember("launcher").gpus(0).milliCPU(2000))
			},
			wantNodes:   []string{"n1", "n2", "n3"},
			wantSummary: "2 pods in NVLink domain c1: 1 NVLink domain, 2 nodes; 1 pod without accelerators on node n3",
		},
		{
			name:  "launcher that fits nowhere",
			nodes: smallCluster(),
			request: func(r *requestWrapper, _ []*nodeWrapper) {
				r.workers(2, 8).members(makeMember("launcher").gpus(0).milliCPU(100000))
			},
			wantErr: "2 of 3 members fit: no node has cpu=100 free for ns/launcher",
		},
		{
			// Each shape fits alone, but the 8-GPU pods take seven nodes and
			// leave six for twelve pods that need a node's CPUs each.
			name:  "shapes that fit alone but not together",
			nodes: smallCluster(),
			request: func(r *requestWrapper, _ []*nodeWrapper) {
				r.workers(7, 8)
				for i := range 12 {
					r.members(makeMember(fmt.Sprintf("cpu-%d", i)).gpus(4).milliCPU(40000))
				}
			},
			wantErr: "0 of 19 members fit: the 19 pods do not pack together into the cluster, though each request shape fits alone",
		},
		{
			// Every whole node holds the pair; n13 is alone in clique c5,
			// the clique with the least room, so it is the best fit.
			name:        "required node",
			nodes:       withNode(smallCluster(), "n1", func(w *nodeWrapper) { w.freeGPUs(4) }),
			request:     func(r *requestWrapper, _ []*nodeWrapper) { r.workers(2, 4).policy(scheduling.HostnameKey, true) },
			wantNodes:   []string{"n13", "n13"},
			wantSummary: "2 pods on node n13",
		},
		{
			name:    "required node unmet",
			nodes:   smallCluster(),
			request: func(r *requestWrapper, _ []*nodeWrapper) { r.workers(3, 4).policy(scheduling.HostnameKey, true) },
			wantErr: "2 of 3 members fit: required node (kubernetes.io/hostname): no node holds the 3 pods asking " +
				"cpu=1 nvidia.com/gpu=4; the roomiest, n1, has room for 2",
		},
		{
			name:  "no member bound by topology",
			nodes: smallCluster(),
			request: func(r *requestWrapper, _ []*nodeWrapper) {
				r.members(makeMember("a").gpus(0), makeMember("b").gpus(0), makeMember("c").gpus(0))
			},
			wantNodes:   []string{"n1", "n1", "n1"},
			wantSummary: "3 pods on 1 node",
		},
		{
			name:        "empty gang",
			nodes:       smallCluster(),
			request:     func(*requestWrapper, []*nodeWrapper) {},
			wantNodes:   []string{},
			wantSummary: "0 pods on 0 nodes",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := makeRequest("ns/gang").nodes(tc.nodes...)
			tc.request(r, tc.nodes)
			req := r.obj()
			plan, err := newTestPlanner(t).Plan(t.Context(), req)
			if tc.wantErr != "" {
				var fe *placement.FitError
				require.ErrorAs(t, err, &fe)
				require.Equal(t, tc.wantErr, fe.Error())
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tc.wantNodes, nodeNames(req, plan)); diff != "" {
				t.Errorf("nodes (-want,+got):\n%s", diff)
			}
			require.Equal(t, tc.wantSummary, plan.Summary)
			requireValid(t, req, plan)
		})
	}
}

// requireValid checks that a plan respects every node's free capacity and
// every member's eligibility.
func requireValid(t *testing.T, req *placement.Request, plan *placement.Plan) {
	t.Helper()
	require.Len(t, plan.NodeOf, len(req.Members))
	used := make([]placement.Vector, len(req.Nodes))
	type kind struct {
		node    int
		request string
	}
	capped := map[kind]int{}
	for i, n := range plan.NodeOf {
		m := &req.Members[i]
		require.True(t, m.EligibleOn(n), "member %s on ineligible node %s", m.Name, req.Nodes[n].Name)
		if m.MaxPerNode > 0 {
			k := kind{n, fmt.Sprint(m.Request)}
			capped[k]++
			require.LessOrEqual(t, capped[k], m.MaxPerNode, "member %s: more than %d of its kind on node %s", m.Name, m.MaxPerNode, req.Nodes[n].Name)
		}
		if used[n] == nil {
			used[n] = make(placement.Vector, len(req.Resources))
		}
		used[n].Add(m.Request)
	}
	for n, u := range used {
		if u != nil {
			require.True(t, u.FitsIn(req.Nodes[n].Free), "node %s overcommitted: %v of %v", req.Nodes[n].Name, u, req.Nodes[n].Free)
		}
	}
}

func TestPlanDetailed(t *testing.T) {
	req := makeRequest("ns/gang").nodes(smallCluster()...).workers(5, 8).policy(cliqueKey, false).obj()
	res, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
	require.NoError(t, err)
	want := &Result{
		Plan:      res.Plan,
		Level:     leafKey,
		LevelName: "leaf",
		Domain:    []PathElem{{Key: spineKey, Value: "s1"}, {Key: leafKey, Value: "l2"}},
		Spans: []LevelSpan{
			{Key: spineKey, Name: "spine", Domains: 1},
			{Key: leafKey, Name: "leaf", Domains: 1},
			{Key: cliqueKey, Name: "NVLink domain", Domains: 2},
			{Key: scheduling.HostnameKey, Name: "node", Domains: 5},
		},
		Bound:   5,
		Relaxed: true,
		Exact:   true,
	}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want,+got):\n%s", diff)
	}
}

func TestPlanUnknownLevel(t *testing.T) {
	req := makeRequest("ns/gang").nodes(smallCluster()...).workers(1, 8).policy("example.com/rack", true).obj()
	_, err := newTestPlanner(t).Plan(t.Context(), req)
	require.ErrorIs(t, err, ErrUnknownLevel)
	require.ErrorContains(t, err, `"example.com/rack"`)
}

func TestPlanMalformedRequest(t *testing.T) {
	req := makeRequest("ns/gang").nodes(smallCluster()...).workers(1, 8).obj()
	req.Members[0].Eligible = []bool{true}
	_, err := newTestPlanner(t).Plan(t.Context(), req)
	require.ErrorContains(t, err, "eligibility covers 1 nodes, want 13")
	var fe *placement.FitError
	require.False(t, errors.As(err, &fe), "a malformed request is not a fit failure")
}

func TestPlanMissingLabels(t *testing.T) {
	// Two cliques' worth of unlabelled nodes must not pass for a domain.
	nodes := []*nodeWrapper{
		makeNode("bare-1"), makeNode("bare-2"), makeNode("bare-3"),
		makeNode("half-1").spine("s1"), makeNode("half-2").spine("s1"),
		makeNode("c-1").spine("s1").clique("c9"), makeNode("c-2").spine("s1").clique("c9"),
	}
	tests := []struct {
		name        string
		gang        int
		policy      string
		required    bool
		wantNodes   []string
		wantSummary string
		wantErr     string
	}{
		{
			name:        "clique without leaf label still holds a pair",
			gang:        2,
			policy:      cliqueKey,
			required:    true,
			wantNodes:   []string{"c-1", "c-2"},
			wantSummary: "2 pods in NVLink domain c9: 1 NVLink domain, 2 nodes",
		},
		{
			name:     "unlabelled nodes are no clique",
			gang:     3,
			policy:   cliqueKey,
			required: true,
			wantErr: "2 of 3 members fit: required NVLink domain (nvidia.com/gpu.clique): no NVLink domain holds the 3 " +
				"pods asking cpu=1 nvidia.com/gpu=8; the roomiest, c9, has room for 2",
		},
		{
			name:        "spine label groups what lacks a leaf",
			gang:        4,
			wantNodes:   []string{"c-1", "c-2", "half-1", "half-2"},
			wantSummary: "4 pods in spine s1: 1 spine, 3 leaves, 3 NVLink domains, 4 nodes",
		},
		{
			name:        "bare nodes only join at cluster level",
			gang:        6,
			wantNodes:   []string{"c-1", "c-2", "half-1", "half-2", "bare-1", "bare-2"},
			wantSummary: "6 pods across the cluster: 3 spines, 5 leaves, 5 NVLink domains, 6 nodes",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := makeRequest("ns/gang").nodes(nodes...).workers(tc.gang, 8).policy(tc.policy, tc.required).obj()
			plan, err := newTestPlanner(t).Plan(t.Context(), req)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			if diff := cmp.Diff(tc.wantNodes, nodeNames(req, plan)); diff != "" {
				t.Errorf("nodes (-want,+got):\n%s", diff)
			}
			require.Equal(t, tc.wantSummary, plan.Summary)
		})
	}
}

func TestPlanFallbackIsValid(t *testing.T) {
	// With no budget the greedy packer plans alone. On a fragmented cluster
	// its plans must still be valid, and never tighter than the exact ones.
	rng := rand.New(rand.NewPCG(3, 4))
	nodes := placementtest.MakeFabric().Spines(2).LeavesPerSpine(4).NodesPerLeaf(8).CliqueSize(4).Obj()
	for i := range nodes {
		nodes[i].Free[1] = int64(rng.IntN(9))
	}
	for _, gang := range []int{3, 17, 60} {
		t.Run(fmt.Sprintf("gang=%d", gang), func(t *testing.T) {
			req := makeRequest("ns/gang").nodeObjs(nodes).workers(gang, 2).obj()
			exact, err := newTestPlanner(t).PlanDetailed(t.Context(), req)
			require.NoError(t, err)
			require.True(t, exact.Exact)

			p := newTestPlanner(t)
			p.budget = 0
			greedy, err := p.PlanDetailed(t.Context(), req)
			require.NoError(t, err)
			require.False(t, greedy.Exact)
			requireValid(t, req, greedy.Plan)
			require.False(t, lexLess(spanCounts(greedy.Spans), spanCounts(exact.Spans)),
				"greedy %v beat exact %v", greedy.Spans, exact.Spans)
		})
	}
}

func spanCounts(spans []LevelSpan) []int {
	out := make([]int, len(spans))
	for i, s := range spans {
		out[i] = s.Domains
	}
	return out
}

// lexLess compares span vectors loosest level first.
func lexLess(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func TestLowerBoundAndSpans(t *testing.T) {
	nodes := placementtest.MakeFabric().Spines(2).LeavesPerSpine(2).NodesPerLeaf(4).CliqueSize(2).Obj()
	nodes[0].Free[1] = 0 // s0-l0 has three free nodes
	req := makeRequest("ns/gang").nodeObjs(nodes).workers(9, 8).members(makeMember("launcher").gpus(0)).obj()
	p := newTestPlanner(t)

	lb, err := p.LowerBound(req)
	require.NoError(t, err)
	want := []LevelSpan{
		{Key: spineKey, Name: "spine", Domains: 2},
		{Key: leafKey, Name: "leaf", Domains: 3},
		{Key: cliqueKey, Name: "NVLink domain", Domains: 5},
		{Key: scheduling.HostnameKey, Name: "node", Domains: 9},
	}
	if diff := cmp.Diff(want, lb); diff != "" {
		t.Errorf("lower bound (-want,+got):\n%s", diff)
	}

	res, err := p.PlanDetailed(t.Context(), req)
	require.NoError(t, err)
	if diff := cmp.Diff(res.Spans, p.Tree(req).Spans(req, res.Plan.NodeOf)); diff != "" {
		t.Errorf("Tree.Spans disagrees with the planner (-planner,+tree):\n%s", diff)
	}
	if diff := cmp.Diff(want, res.Spans); diff != "" {
		t.Errorf("plan spans (-want,+got):\n%s", diff)
	}

	// The greedy planner knows no topology; its spans are counted the same way.
	greedy, err := placementtest.Greedy{}.Plan(t.Context(), req)
	require.NoError(t, err)
	gs := p.Tree(req).Spans(req, greedy.NodeOf)
	require.Len(t, gs, 4)
	require.Equal(t, 9, gs[3].Domains)

	req = makeRequest("ns/gang").nodeObjs(nodes).workers(16, 8).obj()
	_, err = p.LowerBound(req)
	var fe *placement.FitError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "the cluster has room for 15 of the 16 pods asking cpu=1 nvidia.com/gpu=8", fe.Reason)
}

func TestPlanLogsWhyDomainsLost(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(4), ktesting.BufferLogs(true)))
	ctx := klog.NewContext(t.Context(), logger)
	req := makeRequest("ns/gang").nodes(smallCluster()...).workers(4, 8).policy(leafKey, false).obj()
	_, err := newTestPlanner(t).Plan(ctx, req)
	require.NoError(t, err)
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	for _, want := range []string{
		`Topology domain lost gang="ns/gang" level="leaf" domain="l1" reason="spans at best NVLink domain=2 node=4, the winner NVLink domain=1 node=4"`,
		`Topology domain lost gang="ns/gang" level="leaf" domain="l2" reason="same spans at best, more room: 5 slots, the winner 4"`,
		`Topology domain chosen gang="ns/gang" level="leaf" domain="l3" spans="NVLink domain=1 node=4" room=4 greedy=false`,
	} {
		require.Contains(t, logs, want)
	}
}
