package coscheduling

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// TestRoomyFirstPlansAsTheFullScan compares, on random fleets in the
// shipped profile, the plan made with Filter run on the roomy nodes first
// (eligibility.Runner.RoomyFirst) with the plan made after Filter ran on every node: the same
// members on the same nodes, or the same status when the gang does not
// fit. The fleets have busy nodes, tainted nodes (TaintToleration turns
// members away), two GPU products (GPUFleet's uniform groups), another
// gang's plan held ahead of this one and a preemptor's nomination, so that
// the free capacity the pruning reads is the one that holds and
// nominations leave.
func TestRoomyFirstPlansAsTheFullScan(t *testing.T) {
	var pruned, planned, failed int
	for seed := range uint64(24) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 18))
			nodes, running := randomFleet(r, 64)
			size, gpus := 1+r.IntN(8), []string{"1", "2", "4", "8"}[r.IntN(4)]
			job := members("job", size, gpus)
			ahead := members("ahead", 1+r.IntN(4), "4")
			for _, p := range ahead {
				p.Spec.Priority = ptr.To[int32](100) // ahead of job in queue order
			}
			pgs := []*v1alpha1.PodGroup{
				gangtest.MakePodGroup("job", testNS).MinMember(int32(size)).Obj(),
				gangtest.MakePodGroup("ahead", testNS).MinMember(int32(len(ahead))).Obj(),
			}
			// A preemptor nominated to a node: in the nominator, and in its
			// status as the scheduler writes it.
			urgent := st.MakePod().Namespace("other").Name("urgent").UID("urgent").Priority(1000).
				Req(map[v1.ResourceName]string{gpu: "8"}).NominatedNodeName(nodes[r.IntN(len(nodes))].Name).Obj()
			env := newTestEnv(t, nodes, append(append(append(running, job...), ahead...), urgent), pgs, withShippedProfile(t))
			pi, err := framework.NewPodInfo(urgent)
			require.NoError(t, err)
			env.nominator.AddNominatedPod(klog.Background(), pi, &fwk.NominatingInfo{
				NominatingMode: fwk.ModeOverride, NominatedNodeName: urgent.Status.NominatedNodeName})
			_, aheadStatus, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), ahead[0])
			t.Logf("%d members of %s GPUs; the gang ahead: %v", size, gpus, aheadStatus)

			key := gang.Key{Namespace: testNS, Name: "job"}
			attempt := func(noPrune bool) (status string, plan []string) {
				env.ledger().ForgetGang(key)
				env.pl.core.SetFullScan(noPrune)
				_, s, _ := env.fh.RunPreFilterPlugins(env.ctx, framework.NewCycleState(), job[0])
				for _, p := range job {
					nodes, _ := env.ledger().Reservations.PlanSlots(key, p.UID, nil)
					plan = append(plan, fmt.Sprint(p.Name, "=", nodes))
				}
				return fmt.Sprint(s.Code(), ": ", s.Message()), plan
			}
			fullStatus, fullPlan := attempt(true)
			status, plan := attempt(false)
			require.Equal(t, fullStatus, status)
			require.Equal(t, fullPlan, plan)
			if fullStatus == fmt.Sprint(fwk.Success, ": ") {
				planned++
			} else {
				failed++
			}
			if spare := roomless(env, nodes, gpus); spare > 0 {
				pruned++
			}
		})
	}
	// The comparison means something only if both outcomes, and nodes to
	// prune, came up.
	require.Positive(t, planned, "no seed planned its gang")
	require.Positive(t, failed, "no seed failed to plan its gang")
	require.Positive(t, pruned, "no seed had a node to prune")
}

// randomFleet is benchFleet's n nodes, each busy with 0 to 8 GPUs, one in
// eight tainted.
func randomFleet(r *rand.Rand, n int) ([]*v1.Node, []*v1.Pod) {
	nodes, _ := benchFleet(n)
	var running []*v1.Pod
	for i := range nodes {
		if r.IntN(8) == 0 {
			nodes[i].Spec.Taints = []v1.Taint{{Key: "maintenance", Effect: v1.TaintEffectNoSchedule}}
		}
		if busy := r.IntN(9); busy > 0 {
			running = append(running, st.MakePod().Namespace("other").Name(fmt.Sprintf("busy-%03d", i)).
				UID(fmt.Sprintf("busy-%03d", i)).Node(nodes[i].Name).Req(map[v1.ResourceName]string{gpu: fmt.Sprint(busy)}).Obj())
		}
	}
	return nodes, running
}

// roomless counts the nodes on which a member asking for gpus finds too few
// free GPUs in the snapshot: those the pruning skips at least.
func roomless(env *testEnv, nodes []*v1.Node, gpus string) int {
	var want int64
	fmt.Sscan(gpus, &want)
	n := 0
	for _, node := range nodes {
		ni, err := env.snapshot.NodeInfos().Get(node.Name)
		if err == nil && dra.NodeFree(ni, gpu) < want {
			n++
		}
	}
	return n
}
