package simulator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/gpu-gang/gpu-gang/pkg/fleet"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

func loadInput(t *testing.T, path string) *Input {
	t.Helper()
	sc, err := scenario.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	in, err := ScenarioInput(sc)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// default-affinity gives S7's gang members the node affinity of their
// gang's policy, and nothing else: its pods are default's plus the
// affinity, and on S7's nodes the affinity admits exactly the nodes the
// fleet judge (metrics.CountFleet) counts as compatible.
func TestDefaultAffinityOnS7(t *testing.T) {
	in := loadInput(t, "../../scenarios/s7-mixed-fleet.yaml")
	plain, err := LookupProfile(ProfileDefault)
	if err != nil {
		t.Fatal(err)
	}
	configured, err := LookupProfile(ProfileDefaultAffinity)
	if err != nil {
		t.Fatal(err)
	}
	if applies, err := configured.AppliesTo(in); err != nil || !applies {
		t.Fatalf("default-affinity does not apply to S7: %v, %v", applies, err)
	}
	build := func(p Profile, job *scenario.Job) *workload.Objects {
		b := &workload.Builder{Namespace: "sim", Flavor: p.Flavor, SchedulerName: p.SchedulerName, NodeAffinity: p.nodeAffinity(in.Layout)}
		o, err := b.Build(job)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	judge := metrics.LayoutFleet(in.Layout)
	withAffinity := 0
	for i := range in.Jobs {
		job := &in.Jobs[i]
		want, got := build(plain, job), build(configured, job)
		var required *v1.NodeSelector
		if len(got.Pods) > 0 && got.Pods[0].Spec.Affinity != nil {
			required = got.Pods[0].Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
			withAffinity++
		}
		for _, p := range got.Pods {
			p.Spec.Affinity = nil
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("job %s: default-affinity's objects differ from default's beyond the affinity (-default,+default-affinity):\n%s", job.Name, diff)
		}
		if !job.Gang || job.GPUsPerPod == 0 {
			if required != nil {
				t.Errorf("job %s is no GPU gang and has node affinity", job.Name)
			}
			continue
		}
		req, demand, err := metrics.FleetPolicy(job)
		if err != nil {
			t.Fatal(err)
		}
		for n, node := range in.Layout.Nodes {
			admits, _ := judge.Admits(n, req, demand)
			matches := true
			if required != nil {
				matches, err = corev1helpers.MatchNodeSelectorTerms(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels}}, required)
				if err != nil {
					t.Fatal(err)
				}
			}
			if matches != admits {
				t.Errorf("job %s, node %s: affinity matches %v, the fleet judge admits %v", job.Name, node.Name, matches, admits)
			}
		}
	}
	if withAffinity == 0 {
		t.Error("no S7 job got node affinity")
	}
	got, err := notExpressed(in.Layout, in.Jobs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{string(fleet.InexpressibleUniform), string(fleet.InexpressibleUniformCapacity)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules not expressed (-want,+got):\n%s", diff)
	}
}

// Where no gang's policy gives node affinity (the default scenario's
// fabric has no GPU labels), default-affinity would be default again and
// does not run.
func TestDefaultAffinitySkipsUnlabelledFabric(t *testing.T) {
	in := loadInput(t, "../../scenarios/default.yaml")
	p, err := LookupProfile(ProfileDefaultAffinity)
	if err != nil {
		t.Fatal(err)
	}
	if applies, err := p.AppliesTo(in); err != nil || applies {
		t.Errorf("AppliesTo(default scenario) = %v, %v; want false", applies, err)
	}
}
