package gang

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// PodGroupResource is the CRD's <plural>.<version>.<group>.
func TestPodGroupResource(t *testing.T) {
	gv := v1alpha1.SchemeGroupVersion
	require.Equal(t, fwk.EventResource("podgroups."+gv.Version+"."+gv.Group), PodGroupResource)
}

// IsOwnPodGroup queues a member for its own scheduler-plugins PodGroup only.
func TestIsOwnPodGroup(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	labelled := pod("m").Label(scheduling.PodGroupLabel, "g").Obj()
	tests := []struct {
		name string
		pod  *v1.Pod
		pg   interface{}
		want fwk.QueueingHint
	}{
		{name: "its own PodGroup", pod: labelled, pg: gangtest.MakePodGroup("g", "ns").Obj(), want: fwk.Queue},
		{name: "another PodGroup", pod: labelled, pg: gangtest.MakePodGroup("h", "ns").Obj(), want: fwk.QueueSkip},
		{name: "one of the same name elsewhere", pod: labelled, pg: gangtest.MakePodGroup("g", "other").Obj(), want: fwk.QueueSkip},
		{name: "a pod outside gangs", pod: pod("p").Obj(), pg: gangtest.MakePodGroup("g", "ns").Obj(), want: fwk.QueueSkip},
		{name: "a member of a native PodGroup of that name", pod: gangtest.InNativeGroup(pod("n").Obj(), "g"),
			pg: gangtest.MakePodGroup("g", "ns").Obj(), want: fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IsOwnPodGroup(logger, tt.pod, nil, tt.pg)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	_, err := IsOwnPodGroup(logger, labelled, nil, "not an object")
	require.Error(t, err)
}
