package gang

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func TestFromCompositePodGroup(t *testing.T) {
	never := v1.PreemptNever
	tests := []struct {
		name    string
		cpg     *schedulingv1alpha3.CompositePodGroup
		want    CompositeSpec
		wantErr string
	}{
		{name: "gang", cpg: gangtest.MakeCompositePodGroup("job", "ns").MinGroupCount(3).Obj(),
			want: CompositeSpec{Gang: true, MinGroupCount: 3, Terms: Terms{Disruption: DisruptionSingle}}},
		{name: "basic counts one child", cpg: gangtest.MakeCompositePodGroup("job", "ns").Basic().Obj(),
			want: CompositeSpec{MinGroupCount: 1, Terms: Terms{Disruption: DisruptionSingle}}},
		{name: "a child with a topology key, a required level",
			cpg: gangtest.MakeCompositePodGroup("job", "ns").Parent("top").Topology(scheduling.LabelSpine).Workload("train", "stage").Obj(),
			want: CompositeSpec{Gang: true, MinGroupCount: 1, Parent: "top", Topology: &placement.Policy{Level: scheduling.LabelSpine, Required: true},
				Terms: Terms{Disruption: DisruptionSingle}, Workload: &WorkloadRef{Name: "train", Template: "stage"}}},
		{name: "disruption, priority and preemption",
			cpg: gangtest.MakeCompositePodGroup("job", "ns").DisruptAll().Priority("high", 1000).PreemptionPolicy(schedulingv1alpha3.PreemptNever).Obj(),
			want: CompositeSpec{Gang: true, MinGroupCount: 1,
				Terms: Terms{Disruption: DisruptionAll, PriorityClassName: "high", Priority: ptr.To[int32](1000), PreemptionPolicy: &never}}},
		{name: "minGroupCount 0", cpg: gangtest.MakeCompositePodGroup("job", "ns").MinGroupCount(0).Obj(),
			want:    CompositeSpec{Gang: true, Terms: Terms{Disruption: DisruptionSingle}},
			wantErr: "spec.schedulingPolicy.gang.minGroupCount is 0: set it to the number of child groups that must start together (at least 1)"},
		{name: "no policy", cpg: &schedulingv1alpha3.CompositePodGroup{},
			want: CompositeSpec{Terms: Terms{Disruption: DisruptionSingle}}, wantErr: "sets neither spec.schedulingPolicy.basic nor .gang: set one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromCompositePodGroup(tt.cpg)
			want := tt.want
			want.Key = Key{API: Composite, Namespace: tt.cpg.Namespace, Name: tt.cpg.Name}
			want.UID = tt.cpg.UID
			want.Ref = &v1.ObjectReference{APIVersion: "scheduling.k8s.io/v1alpha3", Kind: "CompositePodGroup",
				Namespace: tt.cpg.Namespace, Name: tt.cpg.Name, UID: tt.cpg.UID}
			if diff := cmp.Diff(&want, got, cmpopts.IgnoreUnexported(CompositeSpec{})); diff != "" {
				t.Errorf("FromCompositePodGroup (-want,+got):\n%s", diff)
			}
			err := got.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tt.wantErr)
			}
		})
	}
	cpg := gangtest.MakeCompositePodGroup("job", "ns").Priority("high", 1000).Obj()
	c := FromCompositePodGroup(cpg)
	*cpg.Spec.Priority = 1
	require.EqualValues(t, 1000, *c.Priority, "the spec does not alias the object's priority")
}

// composite and child build a hierarchy's objects, created at t0 plus at
// seconds.
func composite(name string, at int) *gangtest.CompositePodGroupWrapper {
	return gangtest.MakeCompositePodGroup(name, "ns").Created(t0.Add(time.Duration(at)*time.Second)).Workload("train", name)
}

func child(name, parent string, minCount int32, at int) *gangtest.NativePodGroupWrapper {
	w := gangtest.MakeNativePodGroup(name, "ns").MinCount(minCount).Created(t0.Add(time.Duration(at)*time.Second)).Workload("train", name)
	if parent != "" {
		w.Parent(parent)
	}
	return w
}

// hierarchySources reads the objects from informers that are never run.
func hierarchySources(t *testing.T, objs ...interface{}) *Sources {
	t.Helper()
	var composites, native []interface{}
	for _, o := range objs {
		switch o := o.(type) {
		case *gangtest.CompositePodGroupWrapper:
			composites = append(composites, o.Obj())
		case *gangtest.NativePodGroupWrapper:
			native = append(native, o.Obj())
		default:
			t.Fatalf("unexpected %T", o)
		}
	}
	return NewSources(Informers{
		PodGroups:  storeInformer(t, &v1alpha1.PodGroup{}),
		Native:     storeInformer(t, &schedulingv1beta1.PodGroup{}, native...),
		Composites: storeInformer(t, &schedulingv1alpha3.CompositePodGroup{}, composites...),
	})
}

// trainHierarchy is a gang composite "job" of minGroupCount 2 in one spine,
// over a launcher PodGroup, a gang composite of two pipeline stages and a
// basic composite of one; and a basic root "free" over a lone PodGroup and
// a gang composite.
func trainHierarchy() []interface{} {
	return []interface{}{
		composite("job", 0).MinGroupCount(2).Topology(scheduling.LabelSpine),
		child("launcher", "job", 1, 0),
		composite("pp-0", 1).Parent("job").MinGroupCount(2).Topology(scheduling.LabelLeaf),
		child("pp-0-a", "pp-0", 4, 2),
		child("pp-0-b", "pp-0", 4, 3),
		composite("pp-1", 1).Parent("job").Basic(),
		child("pp-1-a", "pp-1", 2, 2),
		composite("free", 0).Basic(),
		child("alone", "free", 2, 1),
		composite("inner", 1).Parent("free").MinGroupCount(1),
		child("inner-a", "inner", 2, 2),
		child("flat", "", 2, 0),
	}
}

func nativeKey(name string) Key    { return Key{API: Native, Namespace: "ns", Name: name} }
func compositeKey(name string) Key { return Key{API: Composite, Namespace: "ns", Name: name} }

func TestRootOf(t *testing.T) {
	s := hierarchySources(t, append(trainHierarchy(),
		child("orphan", "ghost", 1, 0),
		composite("c1", 0).Parent("c2"), composite("c2", 0).Parent("c1"), child("looped", "c1", 1, 0),
		composite("d1", 0), composite("d2", 0).Parent("d1"), composite("d3", 0).Parent("d2"), composite("d4", 0).Parent("d3"),
		child("deep", "d4", 1, 0), child("deep-ok", "d3", 1, 0),
	)...)
	tests := []struct {
		key     Key
		want    Key
		wantErr []string
		is      error
	}{
		{key: nativeKey("pp-0-a"), want: compositeKey("job")},
		{key: nativeKey("launcher"), want: compositeKey("job")},
		{key: nativeKey("pp-1-a"), want: compositeKey("job")},
		{key: nativeKey("alone"), want: nativeKey("alone")},
		{key: nativeKey("inner-a"), want: compositeKey("inner")},
		{key: nativeKey("flat"), want: nativeKey("flat")},
		{key: compositeKey("pp-0"), want: compositeKey("job")},
		{key: Key{Namespace: "ns", Name: "labelled"}, want: Key{Namespace: "ns", Name: "labelled"}},
		{key: nativeKey("deep-ok"), want: compositeKey("d1")},
		{key: nativeKey("orphan"), is: ErrMissingParent, wantErr: []string{
			"ns/orphan (scheduling.k8s.io/v1beta1) names CompositePodGroup ns/ghost as its parent, which does not exist: create it, or recreate ns/orphan"}},
		{key: nativeKey("looped"), is: ErrInvalidHierarchy, wantErr: []string{"form a cycle", "recreate one of them without spec.parentCompositePodGroupName"}},
		{key: compositeKey("c1"), is: ErrInvalidHierarchy, wantErr: []string{"is its own ancestor"}},
		{key: nativeKey("deep"), is: ErrInvalidHierarchy, wantErr: []string{"sits 5 levels deep (under d4, under d3, under d2, under d1); a hierarchy has at most 4 levels"}},
		{key: nativeKey("ghost"), wantErr: []string{`"ghost" not found`}},
	}
	for _, tt := range tests {
		t.Run(tt.key.String(), func(t *testing.T) {
			got, err := s.RootOf(tt.key)
			if len(tt.wantErr) == 0 {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				return
			}
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
			for _, want := range tt.wantErr {
				require.ErrorContains(t, err, want)
			}
		})
	}

	off := NewSources(Informers{Native: storeInformer(t, &schedulingv1beta1.PodGroup{}, child("pp-0-a", "pp-0", 4, 0).Obj()),
		CompositeNote: "the API server does not serve them"})
	_, err := off.RootOf(nativeKey("pp-0-a"))
	require.ErrorIs(t, err, ErrNotWatched)
	require.ErrorContains(t, err, "the API server does not serve them")
	got, err := off.RootOf(nativeKey("ghost"))
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	require.Zero(t, got)
}

// describe renders a tree's nodes as key@depth<parent, in order.
func describe(tree *Tree) []string {
	var out []string
	for _, n := range tree.Nodes {
		parent := "-"
		if n.Parent >= 0 {
			parent = tree.Nodes[n.Parent].Key.Name
		}
		out = append(out, n.Key.Name+"@"+string(rune('0'+n.Depth))+"<"+parent)
	}
	return out
}

func TestBuildTree(t *testing.T) {
	s := hierarchySources(t, append(trainHierarchy(),
		composite("bad", 0), child("bad-a", "bad", 0, 0),
		composite("mixed", 0), child("mixed-a", "mixed", 1, 0), child("mixed-b", "mixed", 1, 1).Workload("other", "x"),
		composite("d1", 0), composite("d2", 0).Parent("d1"), composite("d3", 0).Parent("d2"), composite("d4", 0).Parent("d3"),
		child("deep", "d4", 1, 0),
	)...)
	tree, err := s.Tree(compositeKey("job"))
	require.NoError(t, err)
	// Children oldest first, then by name: the launcher, then pp-0 and
	// pp-1, created together.
	want := []string{"job@1<-", "launcher@2<job", "pp-0@2<job", "pp-0-a@3<pp-0", "pp-0-b@3<pp-0", "pp-1@2<job", "pp-1-a@3<pp-1"}
	if diff := cmp.Diff(want, describe(tree)); diff != "" {
		t.Errorf("tree (-want,+got):\n%s", diff)
	}
	require.Equal(t, []int{1, 2, 5}, tree.Root().Children)
	require.Equal(t, []int{1, 3, 4, 6}, tree.Leaves())

	sub, err := s.Tree(compositeKey("inner"))
	require.NoError(t, err)
	require.Equal(t, []string{"inner@2<-", "inner-a@3<inner"}, describe(sub), "a subtree counts depth from the top")
	lone, err := s.Tree(nativeKey("alone"))
	require.NoError(t, err)
	require.Equal(t, []string{"alone@2<-"}, describe(lone))

	for key, wantErr := range map[Key]string{
		compositeKey("bad"):   "ns/bad-a (scheduling.k8s.io/v1beta1): spec.schedulingPolicy.gang.minCount is 0",
		compositeKey("mixed"): "ns/mixed (CompositePodGroup scheduling.k8s.io/v1alpha3) comes from Workload train and ns/mixed-b (scheduling.k8s.io/v1beta1) from Workload other",
		compositeKey("d1"):    "ns/deep (scheduling.k8s.io/v1beta1) sits 5 levels deep",
	} {
		_, err := s.Tree(key)
		require.ErrorIs(t, err, ErrInvalidHierarchy, key.String())
		require.ErrorContains(t, err, wantErr, key.String())
	}
}

func TestTreeQuorumAndAdmit(t *testing.T) {
	s := hierarchySources(t, trainHierarchy()...)
	tree, err := s.Tree(compositeKey("job"))
	require.NoError(t, err)
	const launcher, pp0, pp0a, pp0b, pp1, pp1a = 1, 2, 3, 4, 5, 6
	waiting := func(n int32) Census { return Census{Waiting: n} }
	bound := func(n int32) Census { return Census{Bound: n} }
	tests := []struct {
		name   string
		census map[string]Census
		root   GroupQuorum
		want   Admission
	}{
		{name: "nothing yet", census: map[string]Census{},
			root: GroupQuorum{Quorum: Quorum{Missing: 2, Absent: 2}, Need: 2, Children: ChildCounts{Total: 3}}},
		{name: "one child gathered of two", census: map[string]Census{"launcher": waiting(1), "pp-0-a": waiting(4)},
			root: GroupQuorum{Quorum: Quorum{Missing: 2, Absent: 1}, Need: 2, Census: waiting(5), Children: ChildCounts{Total: 3, Gathered: 1}}},
		{name: "the first two children that gathered, every PodGroup under them",
			census: map[string]Census{"launcher": waiting(1), "pp-0-a": waiting(4), "pp-0-b": waiting(5), "pp-1-a": waiting(2)},
			root:   GroupQuorum{Quorum: Quorum{Gathered: true, Missing: 2}, Need: 2, Census: waiting(12), Children: ChildCounts{Total: 3, Gathered: 3}},
			want:   Admission{Ready: true, Plan: []int{launcher, pp0a, pp0b}}},
		{name: "a child that has not gathered is passed over",
			census: map[string]Census{"launcher": waiting(1), "pp-0-a": waiting(4), "pp-1-a": waiting(2)},
			root:   GroupQuorum{Quorum: Quorum{Gathered: true, Missing: 2}, Need: 2, Census: waiting(7), Children: ChildCounts{Total: 3, Gathered: 2}},
			want:   Admission{Ready: true, Plan: []int{launcher, pp1a}}},
		{name: "admitted: a child that gathered since joins",
			census: map[string]Census{"launcher": bound(1), "pp-0-a": bound(4), "pp-0-b": bound(4), "pp-1-a": waiting(2)},
			root: GroupQuorum{Quorum: Quorum{Gathered: true, Placed: true, Bound: true}, Need: 2, Census: Census{Bound: 9, Waiting: 2},
				Children: ChildCounts{Total: 3, Gathered: 3, Placed: 2, Bound: 2}},
			want: Admission{Ready: true, Admitted: true, Plan: []int{pp1a}}},
		{name: "repair: the stage below its quorum plans its replacements, the placed ones stay",
			census: map[string]Census{"launcher": bound(1), "pp-0-a": {Bound: 2, Waiting: 2}, "pp-0-b": bound(4)},
			root: GroupQuorum{Quorum: Quorum{Gathered: true, Missing: 1}, Need: 2, Census: Census{Bound: 7, Waiting: 2},
				Children: ChildCounts{Total: 3, Gathered: 2, Placed: 1, Bound: 1}},
			want: Admission{Ready: true, Plan: []int{pp0a}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := TreeQuorumOf(tree, func(k Key) Census {
				require.Equal(t, Native, k.API)
				return tt.census[k.Name]
			})
			if diff := cmp.Diff(tt.root, q[0]); diff != "" {
				t.Errorf("root quorum (-want,+got):\n%s", diff)
			}
			for _, i := range []int{launcher, pp0a, pp0b, pp1a} {
				require.Equal(t, QuorumOf(tree.Nodes[i].Spec.MinMember, tt.census[tree.Nodes[i].Key.Name]), q[i].Quorum, "a PodGroup's quorum is QuorumOf")
			}
			require.EqualValues(t, 1, q[pp1].Need, "a basic composite counts one child")
			require.EqualValues(t, 2, q[pp0].Need)
			if diff := cmp.Diff(tt.want, Admit(tree, q), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Admit (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestTreeHierarchyAndTerms(t *testing.T) {
	s := hierarchySources(t, append(trainHierarchy(), composite("urgent", 0).Priority("high", 1000).DisruptAll(), child("u-a", "urgent", 1, 0))...)
	tree, err := s.Tree(compositeKey("job"))
	require.NoError(t, err)
	leaf := func(i int) placement.Subgroup {
		return placement.Subgroup{Name: tree.Nodes[i].Key.Name, Members: []int{i}}
	}
	spine, leafLevel := placement.Policy{Level: scheduling.LabelSpine, Required: true}, placement.Policy{Level: scheduling.LabelLeaf, Required: true}
	want := &placement.Subgroup{Name: "ns/job (CompositePodGroup scheduling.k8s.io/v1alpha3)", Policy: spine, Children: []placement.Subgroup{
		{Name: "launcher", Members: []int{1}},
		{Name: "ns/pp-0 (CompositePodGroup scheduling.k8s.io/v1alpha3)", Policy: leafLevel, Children: []placement.Subgroup{
			{Name: "pp-0-a", Members: []int{3}}, {Name: "pp-0-b", Members: []int{4}},
		}},
	}}
	if diff := cmp.Diff(want, tree.Hierarchy([]int{1, 3, 4}, leaf)); diff != "" {
		t.Errorf("Hierarchy (-want,+got):\n%s", diff)
	}
	require.Nil(t, tree.Hierarchy(nil, leaf))

	require.Equal(t, Terms{Disruption: DisruptionSingle}, tree.Terms())
	urgent, err := s.Tree(compositeKey("urgent"))
	require.NoError(t, err)
	require.Equal(t, Terms{PriorityClassName: "high", Priority: ptr.To[int32](1000), Disruption: DisruptionAll}, urgent.Terms(), "the root's terms hold for the tree")
	flat, err := s.Tree(nativeKey("flat"))
	require.NoError(t, err)
	require.Equal(t, flat.Root().Spec.Terms(), flat.Terms())

	q := GroupQuorum{Need: 2, Children: ChildCounts{Total: 4, Placed: 3}}
	require.EqualValues(t, 1, ChildSurplusOf(tree.Root().Composite, q))
	require.Zero(t, ChildSurplusOf(urgent.Root().Composite, q), "a composite that goes whole has no surplus")
}

// A gang composite's tree is admitted as one Spec: the root's key, object,
// terms and topology, its quorum counted in children, and the longest of
// its PodGroups' timeouts; a lone PodGroup's tree is that PodGroup's Spec.
func TestTreeSpec(t *testing.T) {
	s := hierarchySources(t, trainHierarchy()...)
	tree, err := s.Tree(compositeKey("job"))
	require.NoError(t, err)
	got := tree.Spec()
	require.Equal(t, compositeKey("job"), got.Key)
	require.Equal(t, tree.Root().Composite.Ref, got.Ref, "Events go to the composite")
	require.EqualValues(t, 2, got.MinMember, "the quorum counts children")
	require.Equal(t, placement.Policy{Level: scheduling.LabelSpine, Required: true}, *got.Topology)
	require.Equal(t, tree.Terms(), got.Terms())
	require.ErrorContains(t, (&Spec{quorumField: got.quorumField}).Validate(), "minGroupCount")

	free, err := s.Tree(compositeKey("inner"))
	require.NoError(t, err)
	require.Equal(t, placement.Policy{}, *free.Spec().Topology, "no constraint is the empty policy, as the hierarchy's root has")

	flat, err := s.Tree(nativeKey("flat"))
	require.NoError(t, err)
	require.Same(t, flat.Root().Spec, flat.Spec())
}
