package simulator

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

func TestLookupProfile(t *testing.T) {
	for _, name := range ProfileNames {
		p, err := LookupProfile(name)
		if err != nil || p.Name != name {
			t.Errorf("LookupProfile(%q) = %+v, %v", name, p, err)
		}
	}
	if _, err := LookupProfile("nope"); err == nil {
		t.Error("an unknown profile is accepted")
	}
}

// gpu-gang-native runs in-tree's very objects, with the API served by the
// API server only: gpu-gang's scheduler runs in a process of its own with
// GenericWorkload off, as the Deployment runs it.
func TestGpuGangNativeRunsInTreeObjects(t *testing.T) {
	native, err := LookupProfile(ProfileGpuGangNative)
	if err != nil {
		t.Fatal(err)
	}
	inTree, err := LookupProfile(ProfileInTree)
	if err != nil {
		t.Fatal(err)
	}
	if native.Flavor != inTree.Flavor || !native.UseConfigFile || !native.SchedulerProcess || len(native.FeatureGates) != 0 {
		t.Errorf("gpu-gang-native = %+v", native)
	}
	if !slices.Contains(native.APIServerFlags, workloadAPIFlag) || !slices.Contains(native.SchedulerFlags, controlplane.SchedulerGatesFlag) {
		t.Errorf("gpu-gang-native flags: API server %v, scheduler %v", native.APIServerFlags, native.SchedulerFlags)
	}
	if got, want := native.gatesSummary(), "kube-apiserver: GenericWorkload=true,TopologyAwareWorkloadScheduling=true; kube-scheduler: GenericWorkload=false,NominatedNodeNameForExpectation=false"; got != want {
		t.Errorf("gatesSummary = %q, want %q", got, want)
	}

	job := scenario.Job{Name: "train-00", Gang: true, Pods: 4, GPUsPerPod: 8, Duration: 10 * time.Second, Priority: 5,
		Topology: &scenario.Topology{Level: scenario.TierLeaf, Required: true}}
	tiers := map[string]string{scenario.TierLeaf: "network.topology.nvidia.com/leaf"}
	build := func(p Profile) *workload.Objects {
		o, err := (&workload.Builder{Namespace: Namespace, Flavor: p.Flavor, SchedulerName: p.SchedulerName, TierKeys: tiers}).Build(&job)
		if err != nil {
			t.Fatal(err)
		}
		for _, pod := range o.Pods {
			pod.Spec.SchedulerName = "" // the one difference, by design
		}
		return o
	}
	if diff := cmp.Diff(build(inTree), build(native)); diff != "" {
		t.Errorf("objects (-in-tree,+gpu-gang-native):\n%s", diff)
	}
}

// TestWithComposites: a workload with segments gets the CompositePodGroup
// API in the profiles that state the hierarchy as composites, and the gate
// on the in-tree scheduler; the others stay as they are.
func TestWithComposites(t *testing.T) {
	for _, tc := range []struct {
		profile                string
		wantGates, wantAPIArgs []string
	}{
		{ProfileGpuGang, nil, nil},
		{ProfileDefault, nil, nil},
		{ProfileInTree, []string{compositeGate}, []string{compositeAPIFlag}},
		{ProfileGpuGangNative, nil, []string{"--feature-gates=" + compositeGate, compositeAPIFlag}},
	} {
		base, err := LookupProfile(tc.profile)
		if err != nil {
			t.Fatal(err)
		}
		got := base.withComposites()
		gates := slices.DeleteFunc(slices.Clone(got.FeatureGates), func(g string) bool { return slices.Contains(base.FeatureGates, g) })
		flags := slices.DeleteFunc(slices.Clone(got.APIServerFlags), func(f string) bool { return slices.Contains(base.APIServerFlags, f) })
		if diff := cmp.Diff(tc.wantGates, gates); diff != "" {
			t.Errorf("%s: added feature gates (-want,+got):\n%s", tc.profile, diff)
		}
		if diff := cmp.Diff(tc.wantAPIArgs, flags); diff != "" {
			t.Errorf("%s: added kube-apiserver flags (-want,+got):\n%s", tc.profile, diff)
		}
		if diff := cmp.Diff(base.SchedulerFlags, got.SchedulerFlags); diff != "" {
			t.Errorf("%s: scheduler flags changed (-want,+got):\n%s", tc.profile, diff)
		}
	}
}

// in-tree-topology is in-tree with a preferred level written as the
// PodGroup's topology key, the one thing a careful in-tree user adds; it runs
// only where some gang prefers a level.
func TestInTreeTopologyKeysPreferredLevels(t *testing.T) {
	plain, err := LookupProfile(ProfileInTree)
	if err != nil {
		t.Fatal(err)
	}
	keyed, err := LookupProfile(ProfileInTreeTopology)
	if err != nil {
		t.Fatal(err)
	}
	tiers := map[string]string{scenario.TierLeaf: "network.topology.nvidia.com/leaf"}
	preferred := scenario.Job{Name: "train-00", Gang: true, Pods: 4, GPUsPerPod: 8, Topology: &scenario.Topology{Level: scenario.TierLeaf}}
	build := func(p Profile) *workload.Objects {
		o, err := (&workload.Builder{Namespace: Namespace, Flavor: p.Flavor, SchedulerName: p.SchedulerName, TierKeys: tiers, PreferredAsKey: p.PreferredAsKey}).Build(&preferred)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	want := build(plain)
	want.NativeGroup.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
		Topology: []schedulingv1beta1.TopologyConstraint{{Key: "network.topology.nvidia.com/leaf"}},
	}
	if diff := cmp.Diff(want, build(keyed)); diff != "" {
		t.Errorf("objects (-in-tree with the key added,+in-tree-topology):\n%s", diff)
	}
	if plain.gatesSummary() != keyed.gatesSummary() || plain.SchedulerName != keyed.SchedulerName {
		t.Errorf("in-tree-topology runs another scheduler set-up: %+v against %+v", keyed, plain)
	}

	required := preferred
	required.Topology = &scenario.Topology{Level: scenario.TierLeaf, Required: true}
	single := scenario.Job{Name: "nb", Pods: 1, GPUsPerPod: 1, Topology: &scenario.Topology{Level: scenario.TierLeaf}}
	for _, tc := range []struct {
		name string
		jobs []scenario.Job
		want bool
	}{
		{"a gang prefers a level", []scenario.Job{required, preferred}, true},
		{"every level is required", []scenario.Job{required}, false},
		{"only a plain pod", []scenario.Job{single}, false},
	} {
		if got, err := keyed.AppliesTo(&Input{Jobs: tc.jobs}); err != nil || got != tc.want {
			t.Errorf("%s: AppliesTo = %v, %v, want %v", tc.name, got, err, tc.want)
		}
		if got, err := plain.AppliesTo(&Input{Jobs: tc.jobs}); err != nil || !got {
			t.Errorf("%s: in-tree does not apply", tc.name)
		}
	}
}

// Every shipped scenario that names its profiles names known ones, and
// the scale scenarios run their scheduler in a process of their own (so
// that the report gives its peak memory) with the profiles the scale comparison
// needs.
func TestShippedScenarioProfiles(t *testing.T) {
	files, err := filepath.Glob("../../scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		sc, err := scenario.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range sc.Profiles {
			if _, err := LookupProfile(p); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
	for _, f := range []string{"s11-scale-5k.yaml", "s11-scale-20k.yaml"} {
		in := loadInput(t, "../../scenarios/"+f)
		if !in.SchedulerProcess || !slices.Equal(in.Profiles, []string{ProfileGpuGang, ProfileDefault, ProfileInTree}) {
			t.Errorf("%s: scheduler process %v, profiles %v", f, in.SchedulerProcess, in.Profiles)
		}
	}
}
