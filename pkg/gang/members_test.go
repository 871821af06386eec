package gang

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

func TestMembersAndWaiting(t *testing.T) {
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{})
	require.NoError(t, IndexMembers(informer))
	require.NoError(t, IndexMembers(informer), "a second plugin finds the index there")

	deleting := pod("deleting").Label(scheduling.PodGroupLabel, "job").Obj()
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, p := range []*v1.Pod{
		pod("waiting").Label(scheduling.PodGroupLabel, "job").Obj(),
		pod("bound").Label(scheduling.PodGroupLabel, "job").Node("n1").Obj(),
		deleting,
		pod("other-gang").Label(scheduling.PodGroupLabel, "other").Obj(),
		pod("other-namespace").Namespace("elsewhere").Label(scheduling.PodGroupLabel, "job").Obj(),
		// A native PodGroup wins over the label: not a member of job.
		gangtest.InNativeGroup(pod("native").Label(scheduling.PodGroupLabel, "job").Obj(), "job"),
		pod("plain").Obj(),
	} {
		require.NoError(t, informer.GetIndexer().Add(p))
	}
	names := func(pods []*v1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		sort.Strings(out)
		return out
	}

	members, err := Members(informer.GetIndexer(), Key{Namespace: "ns", Name: "job"})
	require.NoError(t, err)
	if diff := cmp.Diff([]string{"bound", "waiting"}, names(members)); diff != "" {
		t.Errorf("members (-want,+got):\n%s", diff)
	}
	native, err := Members(informer.GetIndexer(), Key{API: Native, Namespace: "ns", Name: "job"})
	require.NoError(t, err)
	require.Equal(t, []string{"native"}, names(native))

	waiting := Waiting(members)
	require.Len(t, waiting, 1)
	require.Equal(t, "waiting", waiting["ns/waiting"].Name)
	require.Empty(t, Waiting(nil))
}
