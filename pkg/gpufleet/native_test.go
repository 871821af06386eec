package gpufleet

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/plugintest"
)

// nativeMember is a pod of Kubernetes' own PodGroup group.
func nativeMember(name, group string) *v1.Pod {
	p := pod(name, gpus("8")).Obj()
	p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return p
}

// A native PodGroup's GPU annotations apply to its members as a
// scheduler-plugins PodGroup's do, where gpu-gang schedules native
// PodGroups; members wait for their PodGroup, and are activated when it
// arrives and when its GPU annotations change. Elsewhere members have their
// own annotations only.
func TestNativePodGroupAnnotations(t *testing.T) {
	everyWholeGPUNode := []string{"a100-cuda124", "a100-mig", "bare", "h100-cuda1210", "h100-cuda122", "h100-cuda124", "h100-cuda129", "h100-spot", "h100-upgraded"}
	t.Run("not watched", func(t *testing.T) {
		m0 := nativeMember("m0", "train")
		env := newTestEnv(t, fleetNodes(), []*v1.Pod{m0}, nil, nil)
		ok, _, status := env.feasible(m0)
		require.Nil(t, status)
		require.Equal(t, everyWholeGPUNode, ok)
	})

	m0, m1 := nativeMember("m0", "train"), nativeMember("m1", "train")
	env := newTestEnv(t, fleetNodes(), []*v1.Pod{m0, m1}, nil, nil, withNativePodGroups())
	_, status := env.preFilter(m0)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	require.Contains(t, status.Message(), "PodGroup team-a/train (scheduling.k8s.io/v1beta1), whose annotations may set the pod's GPU requirements, is not known yet; "+
		"create it in namespace team-a or recreate the pod without spec.schedulingGroup")
	require.Empty(t, env.Activator.Get())

	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: testNS, Annotations: map[string]string{scheduling.AnnotationMinCUDA: "12.4"}},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}},
	}
	env.SyncNativeWatch()
	pg, err := env.Client.SchedulingV1beta1().PodGroups(testNS).Create(env.ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, []string{"team-a/m0", "team-a/m1"}, env.Activator.Get())
	}, 10*time.Second, 10*time.Millisecond, "the members that waited are activated")

	ok, why, status := env.feasible(m1)
	require.Nil(t, status)
	require.Equal(t, []string{"a100-cuda124", "a100-mig", "h100-cuda1210", "h100-cuda124", "h100-cuda129", "h100-spot", "h100-upgraded"}, ok)
	require.Equal(t, "the node's driver supports CUDA 12.2 (nvidia.com/cuda.runtime-version.full), below the 12.4 the member needs", why["h100-cuda122"])

	// A bad value gets its Event on the native PodGroup, and the edit
	// activates the members again.
	pg.Annotations[scheduling.AnnotationMinCUDA] = "12.x"
	_, err = env.Client.SchedulingV1beta1().PodGroups(testNS).Update(env.ctx, pg, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, env.Activator.Get(), 4)
	}, 10*time.Second, 10*time.Millisecond, "a change of the GPU annotations activates the members")
	_, status = env.preFilter(m0)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
	require.Contains(t, status.Message(), `invalid GPU requirements: PodGroup team-a/train (scheduling.k8s.io/v1beta1): annotation gpu-gang.x-k8s.io/min-cuda="12.x" is not a version`)
	evs := env.Events.Await(t, `Warning InvalidGPURequirements PodGroup team-a/train (scheduling.k8s.io/v1beta1): annotation gpu-gang.x-k8s.io/min-cuda="12.x" is not a version`)
	require.Len(t, evs, 1, "%v", evs)

	// Other edits of the PodGroup activate nobody.
	pg.Annotations = map[string]string{scheduling.AnnotationMinCUDA: "12.x", "team": "vision"}
	_, err = env.Client.SchedulingV1beta1().PodGroups(testNS).Update(env.ctx, pg, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := env.Sources.Spec(gang.Key{API: gang.Native, Namespace: testNS, Name: "train"})
		if assert.NoError(c, err) {
			assert.Equal(c, "vision", got.Annotations["team"])
		}
	}, 10*time.Second, 10*time.Millisecond)
	require.Never(t, func() bool { return len(env.Activator.Get()) != 4 }, plugintest.QuietWindow, 10*time.Millisecond)
}
