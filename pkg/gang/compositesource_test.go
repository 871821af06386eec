package gang

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// Composites come from the scheduler's informer factory: a subscriber hears
// of each as a CompositeSpec, and trees follow children as they are
// created, through the parent index.
func TestSourcesComposites(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cs := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(cs, 0)
	s := NewSources(Informers{
		Native:        factory.Scheduling().V1beta1().PodGroups().Informer(),
		Composites:    factory.Scheduling().V1alpha3().CompositePodGroups().Informer(),
		CompositeNote: "served",
	})
	var mu sync.Mutex
	var heard []string
	require.NoError(t, s.SubscribeComposites(CompositeHandler{
		Added: func(c *CompositeSpec) {
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, "added "+c.Key.String())
		},
	}))
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), s.HasSynced))

	_, err := cs.SchedulingV1alpha3().CompositePodGroups("ns").Create(ctx, composite("job", 0).MinGroupCount(2).Obj(), metav1.CreateOptions{})
	require.NoError(t, err)
	for _, pg := range []*gangtest.NativePodGroupWrapper{child("a", "job", 2, 1), child("b", "job", 2, 2), child("other", "", 1, 0)} {
		_, err := cs.SchedulingV1beta1().PodGroups("ns").Create(ctx, pg.Obj(), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	var tree *Tree
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		tree, err = s.Tree(compositeKey("job"))
		return err == nil && len(tree.Nodes) == 3, nil
	}), "the tree gets its children: %v", err)
	require.Equal(t, []string{"job@1<-", "a@2<job", "b@2<job"}, describe(tree))
	root, err := s.RootOf(nativeKey("b"))
	require.NoError(t, err)
	require.Equal(t, compositeKey("job"), root)
	mu.Lock()
	require.Equal(t, []string{"added ns/job (CompositePodGroup scheduling.k8s.io/v1alpha3)"}, heard)
	mu.Unlock()

	// The PodGroups under a composite are found through its children's
	// parent names, also once it is deleted: a scheduler that hears of
	// the deletion finds the members whose gang it decided.
	_, err = cs.SchedulingV1alpha3().CompositePodGroups("ns").Create(ctx, composite("mid", 3).Parent("job").Obj(), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.SchedulingV1beta1().PodGroups("ns").Create(ctx, child("c", "mid", 1, 4).Obj(), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		under, err := s.PodGroupsUnder(compositeKey("job"))
		return err == nil && len(under) == 3, nil
	}))
	under, err := s.PodGroupsUnder(compositeKey("job"))
	require.NoError(t, err)
	require.Equal(t, []Key{nativeKey("a"), nativeKey("b"), nativeKey("c")}, under)
	require.NoError(t, cs.SchedulingV1alpha3().CompositePodGroups("ns").Delete(ctx, "mid", metav1.DeleteOptions{}))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		_, err := s.Composite(compositeKey("mid"))
		return err != nil, nil
	}))
	under, err = s.PodGroupsUnder(compositeKey("mid"))
	require.NoError(t, err)
	require.Equal(t, []Key{nativeKey("c")}, under, "a deleted composite's children still name it")

	c, err := s.Composite(compositeKey("job"))
	require.NoError(t, err)
	require.EqualValues(t, 2, c.MinGroupCount)
	_, err = s.Spec(compositeKey("job"))
	require.ErrorContains(t, err, "has no members of its own: read it with Sources.Composite")
	at, ok := s.Created(compositeKey("job"))
	require.True(t, ok)
	require.Equal(t, t0, at.UTC())
	watched, note := s.Watched(Composite)
	require.True(t, watched)
	require.Equal(t, "served", note)

	off := NewSources(Informers{Native: factory.Scheduling().V1beta1().PodGroups().Informer(), CompositeNote: "not served"})
	_, err = off.Composite(compositeKey("job"))
	require.ErrorIs(t, err, ErrNotWatched)
	watched, note = off.Watched(Composite)
	require.False(t, watched)
	require.Equal(t, "not served", note)
	require.NoError(t, off.SubscribeComposites(CompositeHandler{}), "nothing to follow")
	_, err = off.Tree(compositeKey("job"))
	require.ErrorIs(t, err, ErrNotWatched)
}

// DecideComposite reads composites only where native PodGroups are
// scheduled and the API server serves them.
func TestDecideComposite(t *testing.T) {
	composites := metav1.APIResource{Name: "compositepodgroups", Namespaced: true, Kind: "CompositePodGroup", Verbs: metav1.Verbs{"get", "list", "watch"}}
	served := []*metav1.APIResourceList{{GroupVersion: schedulingv1alpha3.SchemeGroupVersion.String(), APIResources: []metav1.APIResource{composites}}}
	tests := []struct {
		name      string
		resources []*metav1.APIResourceList
		native    bool
		want      bool
		wantNote  string
	}{
		{name: "served", resources: served, native: true, want: true, wantNote: "serves scheduling.k8s.io/v1alpha3 compositepodgroups"},
		{name: "not served", native: true, wantNote: "does not serve scheduling.k8s.io/v1alpha3 compositepodgroups (it needs the CompositePodGroup feature gate"},
		{name: "native PodGroups not scheduled", resources: served, wantNote: "which this scheduler does not schedule: the native note"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tt.resources}}
			got, note, err := DecideComposite(t.Context(), disc, tt.native, "the native note")
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Contains(t, note, tt.wantNote)
		})
	}
}
