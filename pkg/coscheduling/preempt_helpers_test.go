package coscheduling

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/preempt"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/preemption"
)

// fakeNominator keeps nominations in memory, as the scheduling queue does.
type fakeNominator struct {
	mu     sync.Mutex
	byNode map[string][]fwk.PodInfo
}

func (n *fakeNominator) AddNominatedPod(_ klog.Logger, pi fwk.PodInfo, ni *fwk.NominatingInfo) {
	if ni.Mode() != fwk.ModeOverride {
		return
	}
	n.DeleteNominatedPodIfExists(pi.GetPod())
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byNode == nil {
		n.byNode = map[string][]fwk.PodInfo{}
	}
	n.byNode[ni.NominatedNodeName] = append(n.byNode[ni.NominatedNodeName], pi)
}

func (n *fakeNominator) DeleteNominatedPodIfExists(pod *v1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for node, pis := range n.byNode {
		kept := pis[:0]
		for _, pi := range pis {
			if pi.GetPod().UID != pod.UID {
				kept = append(kept, pi)
			}
		}
		n.byNode[node] = kept
	}
}

func (n *fakeNominator) UpdateNominatedPod(_ klog.Logger, _ *v1.Pod, _ fwk.PodInfo) {}

func (n *fakeNominator) NominatedPodsForNode(node string) []fwk.PodInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]fwk.PodInfo(nil), n.byNode[node]...)
}

// recordingDecider passes requests to the real engine and keeps them.
type recordingDecider struct {
	preempt.Decider
	mu       sync.Mutex
	requests []*preemption.Request
}

func (r *recordingDecider) Decide(ctx context.Context, req *preemption.Request) (*preemption.Decision, error) {
	r.mu.Lock()
	r.requests = append(r.requests, req)
	r.mu.Unlock()
	return r.Decider.Decide(ctx, req)
}

func (r *recordingDecider) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

func (r *recordingDecider) last() *preemption.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[len(r.requests)-1]
}

// record wraps the environment's decider.
func (e *testEnv) record() *recordingDecider {
	e.t.Helper()
	require.NotNil(e.t, e.pl.preempter.Decider(), "preemption needs the topology planner")
	r := &recordingDecider{Decider: e.pl.preempter.Decider()}
	e.pl.preempter = e.pl.newPreempter(r)
	return r
}

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// runningGang is a gang bound to nodes, one 8-GPU member per node, of the
// given priority, started at started.
func runningGang(group string, prio int32, started time.Time, nodes ...string) []*v1.Pod {
	pods := make([]*v1.Pod, len(nodes))
	for i, n := range nodes {
		p := member(group, fmt.Sprintf("%s-%d", group, i), "8")
		p.Labels[scheduling.RankLabel] = fmt.Sprint(i)
		p.Spec.NodeName = n
		p.Spec.Priority = ptr.To(prio)
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
		p.Status.Phase = v1.PodRunning
		p.Status.StartTime = ptr.To(metav1.NewTime(started))
		pods[i] = p
	}
	return pods
}

// urgent is a pending gang of n 8-GPU members of priority prio, as the
// Priority admission plugin leaves them: priorityClassName and the
// resolved spec.priority.
func urgent(group string, n int, prio int32) []*v1.Pod {
	pods := members(group, n, "8")
	for i, p := range pods {
		p.Labels[scheduling.RankLabel] = fmt.Sprint(i)
		p.Spec.PriorityClassName = "urgent"
		p.Spec.Priority = ptr.To(prio)
		p.CreationTimestamp = metav1.NewTime(t0.Add(time.Hour))
	}
	return pods
}

// fullFabric fills the 8-node fabric of topology_test.go with four
// low-priority 2-node gangs, one per leaf; the later a gang's leaf, the
// more recently it started, so low-d loses the least work.
func fullFabric() (nodes []*v1.Node, running []*v1.Pod, pgs []*v1alpha1.PodGroup) {
	nodes = fabric()
	for i, leaf := range []string{"s0-l0", "s0-l1", "s1-l0", "s1-l1"} {
		name := "low-" + string(rune('a'+i))
		running = append(running, runningGang(name, 0, t0.Add(time.Duration(i)*time.Minute), leaf+"-n0", leaf+"-n1")...)
		pgs = append(pgs, gangtest.MakePodGroup(name, testNS).MinMember(2).Created(t0).Obj())
	}
	return nodes, running, pgs
}

// attempt runs one scheduling cycle for pod as the scheduler does, through
// PostFilter if no node fits, and returns PostFilter's result and status
// (nil, nil if a node fit; the pod is then assumed and reserved).
func (e *testEnv) attempt(pod *v1.Pod) (*fwk.PostFilterResult, *fwk.Status) {
	e.t.Helper()
	state := framework.NewCycleState()
	res, status, _ := e.fh.RunPreFilterPlugins(e.ctx, state, pod)
	statuses := framework.NewDefaultNodeToStatus()
	if !status.IsSuccess() {
		statuses.SetAbsentNodesStatus(status)
		return e.fh.RunPostFilterPlugins(e.ctx, state, pod, statuses)
	}
	infos, err := e.snapshot.NodeInfos().List()
	require.NoError(e.t, err)
	sort.Slice(infos, func(i, j int) bool { return infos[i].Node().Name < infos[j].Node().Name })
	if res != nil && !res.AllNodes() {
		statuses.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [Coscheduling]"))
	}
	for _, ni := range infos {
		if res != nil && !res.AllNodes() && !res.NodeNames.Has(ni.Node().Name) {
			continue
		}
		s := e.fh.RunFilterPlugins(e.ctx, state, pod, ni)
		if s.IsSuccess() {
			assumed := pod.DeepCopy()
			assumed.Spec.NodeName = ni.Node().Name
			e.assume(assumed)
			require.True(e.t, e.fh.RunReservePluginsReserve(e.ctx, state, assumed, ni.Node().Name).IsSuccess())
			return nil, nil
		}
		statuses.Set(ni.Node().Name, s)
	}
	return e.fh.RunPostFilterPlugins(e.ctx, state, pod, statuses)
}

// gracefulDeletes makes the fake API server delete pods gracefully, as
// kube-apiserver does for a bound pod with a grace period: the pod gets a
// deletionTimestamp and stays until finishDeletion.
func (e *testEnv) gracefulDeletes() {
	e.client.PrependReactor("delete", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		da := action.(k8stesting.DeleteAction)
		obj, err := e.client.Tracker().Get(da.GetResource(), da.GetNamespace(), da.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		pod.DeletionTimestamp = ptr.To(metav1.Now())
		pod.DeletionGracePeriodSeconds = pod.Spec.TerminationGracePeriodSeconds
		return true, nil, e.client.Tracker().Update(da.GetResource(), pod, da.GetNamespace())
	})
}

// finishDeletion removes pods being deleted, as their kubelet confirms it,
// and waits until the informer and the snapshot no longer have them.
func (e *testEnv) finishDeletion(pods ...*v1.Pod) {
	e.t.Helper()
	e.syncWatch()
	for _, p := range pods {
		require.NoError(e.t, e.client.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), p.Namespace, p.Name))
		e.waitForLister(p, nil)
		e.forget(p)
	}
}

// deleted returns the names of the pods the plugin deleted, in order, and
// checks that each was first marked as a preemption victim.
func (e *testEnv) deleted() []string {
	e.t.Helper()
	marked := map[string]bool{}
	var out []string
	for _, a := range e.client.Actions() {
		switch a := a.(type) {
		case k8stesting.PatchAction:
			if a.GetResource().Resource == "pods" && a.GetSubresource() == "status" {
				marked[a.GetName()] = true
				require.Contains(e.t, string(a.GetPatch()), string(v1.PodReasonPreemptionByScheduler))
			}
		case k8stesting.DeleteAction:
			if a.GetResource().Resource == "pods" && a.GetNamespace() != "probe" {
				require.True(e.t, marked[a.GetName()], "pod %s was deleted without the %s condition", a.GetName(), v1.DisruptionTarget)
				out = append(out, a.GetName())
			}
		}
	}
	sort.Strings(out)
	return out
}

// dimOf is the index of a resource in a request's vectors.
func dimOf(t *testing.T, req *preemption.Request, name v1.ResourceName) int {
	t.Helper()
	for d, r := range req.Resources {
		if r == string(name) {
			return d
		}
	}
	t.Fatalf("the request does not count %s: %v", name, req.Resources)
	return -1
}

func podsNamed(pods []*v1.Pod, names ...string) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range pods {
		for _, n := range names {
			if p.Name == n {
				out = append(out, p)
			}
		}
	}
	return out
}
