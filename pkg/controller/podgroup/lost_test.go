package podgroup

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

func TestLostMembersAreNamedHowTheyWent(t *testing.T) {
	var nodes nodeLedger
	var lost lostLedger
	spot := st.MakeNode().Name("n-spot").Label(scheduling.LabelKarpenterCapacityType, "spot").Obj()
	onDemand := st.MakeNode().Name("n-od").Label(scheduling.LabelKarpenterCapacityType, "on-demand").Obj()
	nodes.observe(spot, false, t0)
	nodes.observe(onDemand, false, t0)

	member := func(name, node string) *corev1.Pod {
		return st.MakePod().Namespace(testNS).Name(name).Label(scheduling.PodGroupLabel, "train").Node(node).Phase(corev1.PodRunning).Obj()
	}
	record := func(p *corev1.Pod) {
		reclaimed, _ := nodes.spotReclaimed(p.Spec.NodeName)
		lost.record(p, gang.XK8s, reclaimed, t0)
	}
	// The spot node goes away; the pod garbage collector deletes its pod.
	nodes.observe(spot, true, t0)
	record(member("w-0", "n-spot"))
	// An eviction on an on-demand node.
	evicted := member("w-1", "n-od")
	evicted.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"}}
	record(evicted)
	// A member that finished is not lost, nor a pod that never had a node.
	record(st.MakePod().Namespace(testNS).Name("done").Label(scheduling.PodGroupLabel, "train").Node("n-od").Phase(corev1.PodSucceeded).Obj())
	record(st.MakePod().Namespace(testNS).Name("pending").Label(scheduling.PodGroupLabel, "train").Obj())

	got := lost.of(types.NamespacedName{Namespace: testNS, Name: "train"})
	if len(got) != 2 {
		t.Fatalf("remembered %d members, want 2: %+v", len(got), got)
	}
	msg := describeMissing(nil, got, 2)
	for _, want := range []string{"w-0 (reclaimed with spot node n-spot)", "w-1 (evicted from node n-od)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("missing members %q do not say %q", msg, want)
		}
	}

	// A spot node that is forgotten after a long while no longer names
	// reclaims; an on-demand one never did.
	if r, _ := nodes.spotReclaimed("n-od"); r {
		t.Error("an on-demand node was taken for a spot reclaim")
	}
	nodes.observe(onDemand, false, t0.Add(goneNodeMemory+time.Minute))
	if r, s := nodes.spotReclaimed("n-spot"); r || s {
		t.Errorf("a spot node gone for over %s is still remembered", goneNodeMemory)
	}
}
