package coscheduling

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/preempt"
)

// TestNominationsMatchTheNominator checks core.Planner.WithNominated,
// which asks the nominator only about the nodes nominations names, against
// a scan of every node (what plans did before), with kube-scheduler's own
// queue as the nominator. Pods are created, nominated through their status or by
// the plugin's PostFilter, renominated, cleared, bound and deleted at
// random; the queue and the set see each change as the scheduler's event
// handlers and PostFilter's result would hand it to them.
func TestNominationsMatchTheNominator(t *testing.T) {
	nodes := gpuNodes(60) // many more than nominated pods: a node missed is a node nothing else names
	env := newTestEnv(t, nodes, nil, nil)
	factory := informers.NewSharedInformerFactory(clientsetfake.NewClientset(), 0)
	store := factory.Core().V1().Pods().Informer().GetStore()
	queue := internalqueue.NewTestQueueWithInformerFactory(env.ctx, func(a, b fwk.QueuedEntityInfo) bool { return false }, factory)
	env.fh.SetPodNominator(queue)
	logger := klog.Background()

	list, err := env.snapshot.NodeInfos().List()
	require.NoError(t, err)
	sorted := env.pl.core.Snapshot().Live(list, env.pl.core.NodeGeneration(), env.pl.core.LiveNodes)
	// everyNode is the plan's former scan: preempt.NominatedRoom on every live
	// node.
	everyNode := func(held map[string]capacity.Amounts, priority int32) map[string]capacity.Amounts {
		out := map[string]capacity.Amounts{}
		for n, h := range held {
			out[n] = h
		}
		for _, ni := range sorted {
			if a := preempt.NominatedRoom(env.pl.handle, ni.Node().Name, priority, ""); a != nil {
				sum := capacity.Amounts{}
				sum.Add(out[ni.Node().Name])
				sum.Add(a)
				out[ni.Node().Name] = sum
			}
		}
		return out
	}

	r := rand.New(rand.NewPCG(18, 7))
	// "gone" is a node the snapshot does not have: the nominator may name it.
	node := func() string {
		if r.IntN(10) == 0 {
			return "gone"
		}
		return nodes[r.IntN(len(nodes))].Name
	}
	live := map[string]*v1.Pod{}
	var names []string
	update := func(old, p *v1.Pod) {
		require.NoError(t, store.Update(p))
		queue.Update(env.ctx, old, p)
		env.pl.nominations.Observe(p)
		live[p.Name] = p
	}
	nominated := 0
	for step := range 600 {
		var p *v1.Pod
		if len(names) > 0 {
			p = live[names[r.IntN(len(names))]]
		}
		switch op := r.IntN(10); {
		case p == nil || op < 2: // a pod comes, sometimes nominated already
			name := fmt.Sprint("p-", step)
			w := st.MakePod().Namespace("other").Name(name).UID(name).Priority(int32(r.IntN(3) * 100)).
				Req(map[v1.ResourceName]string{gpu: fmt.Sprint(1 + r.IntN(8))})
			if r.IntN(4) == 0 {
				w = w.Label("scheduling.x-k8s.io/pod-group", "g") // a gang member: preempt.NominatedRoom skips it
			}
			if r.IntN(2) == 0 {
				w = w.NominatedNodeName(node())
			}
			p = w.Obj()
			require.NoError(t, store.Add(p))
			queue.Add(env.ctx, p)
			env.pl.nominations.Observe(p)
			live[name], names = p, append(names, name)
		case op < 4: // the plugin's PostFilter nominates it
			if p.Spec.NodeName != "" {
				continue
			}
			n := node()
			pi, err := framework.NewPodInfo(p)
			require.NoError(t, err)
			env.pl.nominations.Nominate(p.UID, n)
			queue.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride, NominatedNodeName: n})
		case op < 6: // the status changes: the nomination written, moved or cleared
			q := p.DeepCopy()
			q.ResourceVersion = fmt.Sprint(step)
			q.Status.NominatedNodeName = ""
			if r.IntN(3) > 0 {
				q.Status.NominatedNodeName = node()
			}
			q.Labels = map[string]string{"step": fmt.Sprint(step)} // an update that changes something else
			update(p, q)
		case op < 7: // bound: assumed (the nominator forgets it), then no longer pending
			if p.Spec.NodeName != "" {
				continue
			}
			queue.DeleteNominatedPodIfExists(p)
			q := p.DeepCopy()
			q.Spec.NodeName = nodes[r.IntN(len(nodes))].Name
			require.NoError(t, store.Update(q))
			queue.Delete(logger, p)
			env.pl.nominations.Observe(q)
			live[p.Name] = q
		default: // deleted: pods stay few
			require.NoError(t, store.Delete(p))
			queue.Delete(logger, p)
			env.pl.nominations.ObserveDelete(p)
			delete(live, p.Name)
			names = slices.Sorted(maps.Keys(live)) // never map order: the run repeats

		}
		for _, priority := range []int32{0, 100, 200} {
			held := map[string]capacity.Amounts{nodes[step%len(nodes)].Name: {gpu: 1}}
			want := everyNode(held, priority)
			got := env.pl.core.WithNominated(held, sorted, priority)
			require.Empty(t, cmp.Diff(want, got), "step %d, priority %d (-every node,+nominations)", step, priority)
			if len(got) > len(held) || got[nodes[step%len(nodes)].Name][gpu] > 1 {
				nominated++
			}
		}
	}
	// The comparison is only worth something if nominations did count.
	require.Greater(t, nominated, 100, "too few steps had a nominated pod")
}
