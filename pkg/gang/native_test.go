package gang

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

func TestOf(t *testing.T) {
	native := func(p *v1.Pod, group string) *v1.Pod { return gangtest.InNativeGroup(p, group) }
	tests := []struct {
		name      string
		pod       *v1.Pod
		want      Key
		wantOK    bool
		wantLabel Key
	}{
		{name: "no gang", pod: pod("p").Obj()},
		{name: "label", pod: pod("p").Label(scheduling.PodGroupLabel, "a").Obj(),
			want: Key{Namespace: "ns", Name: "a"}, wantOK: true, wantLabel: Key{Namespace: "ns", Name: "a"}},
		{name: "schedulingGroup", pod: native(pod("p").Obj(), "b"),
			want: Key{API: Native, Namespace: "ns", Name: "b"}, wantOK: true},
		{name: "both: the native PodGroup wins", pod: native(pod("p").Label(scheduling.PodGroupLabel, "a").Obj(), "b"),
			want: Key{API: Native, Namespace: "ns", Name: "b"}, wantOK: true, wantLabel: Key{Namespace: "ns", Name: "a"}},
		{name: "schedulingGroup without a name", pod: func() *v1.Pod {
			p := pod("p").Obj()
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{}
			return p
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Of(tt.pod)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Of = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
			if label, _ := OfLabel(tt.pod); label != tt.wantLabel {
				t.Errorf("OfLabel = %v, want %v", label, tt.wantLabel)
			}
		})
	}
}

// Keys of the two APIs never render alike, so an index by String never
// mixes their members; the x-k8s key renders as it always has.
func TestKeyString(t *testing.T) {
	xk8s := Key{Namespace: "ns", Name: "job"}
	native := Key{API: Native, Namespace: "ns", Name: "job"}
	if got := xk8s.String(); got != "ns/job" {
		t.Errorf("x-k8s key = %q, want ns/job", got)
	}
	if got := native.String(); got != "ns/job (scheduling.k8s.io/v1beta1)" {
		t.Errorf("native key = %q", got)
	}
}

func TestFromNativePodGroup(t *testing.T) {
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	never := v1.PreemptNever
	tests := []struct {
		name string
		pg   *schedulingv1beta1.PodGroup
		want Spec
	}{
		{
			name: "gang",
			pg:   gangtest.MakeNativePodGroup("job", "ns").MinCount(4).Created(created).Obj(),
			want: Spec{MinMember: 4, Disruption: DisruptionSingle},
		},
		{
			name: "basic: members start one by one",
			pg:   gangtest.MakeNativePodGroup("job", "ns").Basic().Created(created).Obj(),
			want: Spec{MinMember: 1, Disruption: DisruptionSingle},
		},
		{
			name: "a topology constraint is a required level",
			pg:   gangtest.MakeNativePodGroup("job", "ns").MinCount(2).Topology(scheduling.LabelLeaf).Created(created).Obj(),
			want: Spec{MinMember: 2, Disruption: DisruptionSingle, Topology: &placement.Policy{Level: scheduling.LabelLeaf, Required: true}},
		},
		{
			name: "disruption, priority, preemption and workload",
			pg: gangtest.MakeNativePodGroup("job", "ns").MinCount(8).DisruptAll().Priority("high", 1000).
				PreemptionPolicy(schedulingv1beta1.PreemptNever).Workload("train", "workers").Created(created).Obj(),
			want: Spec{MinMember: 8, Disruption: DisruptionAll, PriorityClassName: "high", Priority: ptr.To[int32](1000),
				PreemptionPolicy: &never, Workload: &WorkloadRef{Name: "train", Template: "workers"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromNativePodGroup(tt.pg)
			want := tt.want
			want.Key = Key{API: Native, Namespace: "ns", Name: "job"}
			want.UID = tt.pg.UID
			want.Created = created
			want.Ref = &v1.ObjectReference{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Namespace: "ns", Name: "job", UID: tt.pg.UID}
			if diff := cmp.Diff(&want, got, cmpopts.IgnoreUnexported(Spec{})); diff != "" {
				t.Errorf("FromNativePodGroup (-want,+got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

// The adapter copies what it keeps: the Spec does not alias the object's
// priority.
func TestFromNativePodGroupCopiesPriority(t *testing.T) {
	pg := gangtest.MakeNativePodGroup("job", "ns").Priority("high", 1000).Obj()
	s := FromNativePodGroup(pg)
	*pg.Spec.Priority = 1
	if *s.Priority != 1000 {
		t.Errorf("Spec.Priority follows the object: %d", *s.Priority)
	}
}

// Validate names the field of the API the gang came from.
func TestValidateNamesTheField(t *testing.T) {
	tests := []struct {
		name string
		spec *Spec
		want string
	}{
		{name: "x-k8s", spec: FromPodGroup(gangtest.MakePodGroup("job", "ns").MinMember(0).Obj()), want: "spec.minMember is 0"},
		{name: "native", spec: FromNativePodGroup(gangtest.MakeNativePodGroup("job", "ns").MinCount(0).Obj()), want: "spec.schedulingPolicy.gang.minCount is 0"},
		{name: "native without a policy", spec: FromNativePodGroup(&schedulingv1beta1.PodGroup{}), want: "neither basic nor gang"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.spec.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// A native topology constraint wins over gpu-gang's annotations and Kueue's,
// which still give a native PodGroup without a constraint its policy.
func TestPolicyOfNative(t *testing.T) {
	leaf, spine := scheduling.LabelLeaf, scheduling.LabelSpine
	constrained := FromNativePodGroup(gangtest.MakeNativePodGroup("job", "ns").Topology(leaf).
		Annotation(scheduling.AnnotationTopologyPreferred, spine).Obj())
	if got, want := PolicyOf(constrained, nil), (placement.Policy{Level: leaf, Required: true}); got != want {
		t.Errorf("constrained: PolicyOf = %+v, want %+v", got, want)
	}
	annotated := FromNativePodGroup(gangtest.MakeNativePodGroup("job", "ns").Annotation(scheduling.AnnotationTopologyPreferred, spine).Obj())
	if got, want := PolicyOf(annotated, nil), (placement.Policy{Level: spine}); got != want {
		t.Errorf("annotated: PolicyOf = %+v, want %+v", got, want)
	}
}

// DecideNative schedules native PodGroups only where discovery serves them
// and this scheduler's GenericWorkload gate is off; a discovery error other
// than "not served" is retried, then reported.
func TestDecideNative(t *testing.T) {
	podGroups := metav1.APIResource{Name: "podgroups", Namespaced: true, Kind: "PodGroup", Verbs: metav1.Verbs{"get", "list", "watch"}}
	workloads := metav1.APIResource{Name: "workloads", Namespaced: true, Kind: "Workload", Verbs: metav1.Verbs{"get", "list", "watch"}}
	served := []*metav1.APIResourceList{{GroupVersion: "scheduling.k8s.io/v1beta1", APIResources: []metav1.APIResource{podGroups, workloads}}}
	tests := []struct {
		name            string
		resources       []*metav1.APIResourceList
		genericWorkload bool
		want            bool
		wantNote        string
	}{
		{name: "served", resources: served, want: true, wantNote: "pods that set spec.schedulingGroup are gangs"},
		{name: "group version not served", wantNote: "does not serve scheduling.k8s.io/v1beta1 podgroups"},
		{name: "podgroups not served", resources: []*metav1.APIResourceList{{GroupVersion: "scheduling.k8s.io/v1beta1", APIResources: []metav1.APIResource{workloads}}},
			wantNote: "does not serve scheduling.k8s.io/v1beta1 podgroups"},
		{name: "served, but the scheduler's gate is on", resources: served, genericWorkload: true, wantNote: "--feature-gates=GenericWorkload=false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tt.resources}}
			got, note, err := DecideNative(t.Context(), disc, tt.genericWorkload)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Contains(t, note, tt.wantNote)
		})
	}
	t.Run("discovery fails", func(t *testing.T) {
		fake := &clienttesting.Fake{}
		fake.AddReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("connection refused")
		})
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		_, _, err := DecideNative(ctx, &fakediscovery.FakeDiscovery{Fake: fake}, false)
		require.ErrorContains(t, err, "connection refused")
	})
}
