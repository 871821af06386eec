package gang

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// storeInformer is an informer that is never run: a test fills its store.
func storeInformer(t *testing.T, example runtime.Object, objs ...interface{}) cache.SharedIndexInformer {
	t.Helper()
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{}, example, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		require.NoError(t, informer.GetStore().Add(o))
	}
	return informer
}

// Sources read one informer per API, Specs out, the API in the key choosing
// which; an API without an informer is not watched, and says why.
func TestSources(t *testing.T) {
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := NewSources(Informers{
		PodGroups: storeInformer(t, &v1alpha1.PodGroup{}, gangtest.MakePodGroup("job", "ns").MinMember(4).Created(created).Obj()),
		Native: storeInformer(t, &schedulingv1beta1.PodGroup{},
			gangtest.MakeNativePodGroup("job", "ns").MinCount(8).Created(created.Add(time.Minute)).Obj()),
		NativeNote: "the API server serves them",
	})
	xKey := Key{Namespace: "ns", Name: "job"}
	nKey := Key{API: Native, Namespace: "ns", Name: "job"}

	x, err := s.Spec(xKey)
	require.NoError(t, err)
	require.Equal(t, xKey, x.Key)
	require.EqualValues(t, 4, x.MinMember)
	n, err := s.Spec(nKey)
	require.NoError(t, err)
	require.Equal(t, nKey, n.Key)
	require.EqualValues(t, 8, n.MinMember)
	require.Equal(t, "scheduling.k8s.io/v1beta1", n.Ref.APIVersion)

	at, ok := s.Created(nKey)
	require.True(t, ok)
	require.Equal(t, created.Add(time.Minute), at)
	at, ok = s.Created(xKey)
	require.True(t, ok)
	require.Equal(t, created, at)
	_, err = s.Spec(Key{API: Native, Namespace: "ns", Name: "ghost"})
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	_, ok = s.Created(Key{Namespace: "elsewhere", Name: "job"})
	require.False(t, ok)
	watched, note := s.Watched(Native)
	require.True(t, watched)
	require.Equal(t, "the API server serves them", note)

	off := NewSources(Informers{PodGroups: storeInformer(t, &v1alpha1.PodGroup{}, gangtest.MakePodGroup("job", "ns").Obj()), NativeNote: "off"})
	_, err = off.Spec(nKey)
	require.ErrorIs(t, err, ErrNotWatched)
	require.EqualError(t, err, "not watched: off")
	_, ok = off.Created(nKey)
	require.False(t, ok)
	watched, note = off.Watched(Native)
	require.False(t, watched)
	require.Equal(t, "off", note)
	_, err = off.Spec(xKey)
	require.NoError(t, err, "the other API is unaffected")
	require.NoError(t, off.Subscribe(Handler{}), "an unwatched API has nothing to follow")
}

// Subscribers hear of every change of either API's objects as Specs, once
// the lister has it, and HasSynced waits for the objects listed before they
// subscribed.
func TestSourcesSubscribe(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pgClient := pgfake.NewSimpleClientset(gangtest.MakePodGroup("early", "ns").Obj())
	podGroups := gangtest.NewPodGroupInformer(pgClient)
	cs := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(cs, 0)
	s := NewSources(Informers{PodGroups: podGroups, Native: factory.Scheduling().V1beta1().PodGroups().Informer()})
	go podGroups.Run(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), podGroups.HasSynced))

	var mu sync.Mutex
	var heard []string
	// seen says what the handler saw, and whether Spec already returned
	// that version of the gang.
	seen := func(what string, spec *Spec) {
		got, err := s.Spec(spec.Key)
		inLister := err == nil && got.Generation == spec.Generation
		if what == "deleted" {
			inLister = apierrors.IsNotFound(err)
		}
		mu.Lock()
		defer mu.Unlock()
		heard = append(heard, fmt.Sprintf("%s %s generation %d, lister agrees: %v", what, spec.Key, spec.Generation, inLister))
	}
	require.NoError(t, s.Subscribe(Handler{
		Added: func(spec *Spec) { seen("added", spec) },
		Updated: func(old, new *Spec) {
			seen(fmt.Sprintf("updated from generation %d:", old.Generation), new)
		},
		Deleted: func(spec *Spec) { seen("deleted", spec) },
	}))
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), s.HasSynced))
	take := func(n int) []string {
		t.Helper()
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return len(heard) >= n, nil
		}), "heard %v", heard)
		mu.Lock()
		defer mu.Unlock()
		out := heard
		heard = nil
		return out
	}
	require.Equal(t, []string{"added ns/early generation 0, lister agrees: true"}, take(1), "HasSynced waits for the objects listed before")

	native := gangtest.MakeNativePodGroup("job", "ns").Generation(1).Obj()
	_, err := cs.SchedulingV1beta1().PodGroups("ns").Create(ctx, native, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"added ns/job (scheduling.k8s.io/v1beta1) generation 1, lister agrees: true"}, take(1))
	native.Generation = 2
	_, err = cs.SchedulingV1beta1().PodGroups("ns").Update(ctx, native, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"updated from generation 1: ns/job (scheduling.k8s.io/v1beta1) generation 2, lister agrees: true"}, take(1))
	require.NoError(t, cs.SchedulingV1beta1().PodGroups("ns").Delete(ctx, "job", metav1.DeleteOptions{}))
	require.Equal(t, []string{"deleted ns/job (scheduling.k8s.io/v1beta1) generation 2, lister agrees: true"}, take(1))
	require.NoError(t, pgClient.SchedulingV1alpha1().PodGroups("ns").Delete(ctx, "early", metav1.DeleteOptions{}))
	require.Equal(t, []string{"deleted ns/early generation 0, lister agrees: true"}, take(1))
}

// SlimPodGroup keeps what FromPodGroup reads and drops the status.
func TestSlimPodGroup(t *testing.T) {
	pg := gangtest.MakePodGroup("job", "ns").MinMember(4).ScheduleTimeoutSeconds(30).Annotation("a", "b").Generation(3).
		Phase(v1alpha1.PodGroupRunning).Obj()
	pg.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	obj, err := SlimPodGroup(pg)
	require.NoError(t, err)
	slim := obj.(*v1alpha1.PodGroup)
	require.Empty(t, slim.Status, "the status is dropped")
	require.Empty(t, slim.ManagedFields)
	require.Equal(t, pg.Spec, slim.Spec)
	want := FromPodGroup(pg)
	require.Equal(t, want, FromPodGroup(slim), "the adapter reads the same from the slim object")
	require.Equal(t, "kubectl", pg.ManagedFields[0].Manager, "the informer's object is not changed")
}

// fakeHandle is a scheduler's handle, as StartSources reads it.
type fakeHandle struct {
	config    *rest.Config
	clientset kubernetes.Interface
	factory   informers.SharedInformerFactory
}

func (h fakeHandle) KubeConfig() *rest.Config                               { return h.config }
func (h fakeHandle) ClientSet() kubernetes.Interface                        { return h.clientset }
func (h fakeHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.factory }

// The plugins of one scheduler, of any profile, share one Sources, and so
// one PodGroup informer; another scheduler in the same process gets its
// own, and a scheduler that stops lets go of its.
func TestSharedSources(t *testing.T) {
	// lists counts the informers that start on PodGroups: each lists them,
	// or asks for a watch-list stream, once.
	var lists atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/scheduling.x-k8s.io/v1alpha1/podgroups" {
			http.NotFound(w, r)
			return
		}
		watching, initial := r.URL.Query().Get("watch") == "true", r.URL.Query().Get("sendInitialEvents") == "true"
		if !watching || initial {
			lists.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		if watching {
			w.WriteHeader(http.StatusOK)
			if initial {
				fmt.Fprint(w, `{"type":"BOOKMARK","object":{"kind":"PodGroup","apiVersion":"scheduling.x-k8s.io/v1alpha1","metadata":{"resourceVersion":"1","annotations":{"k8s.io/initial-events-end":"true"}}}}`+"\n")
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		fmt.Fprint(w, `{"kind":"PodGroupList","apiVersion":"scheduling.x-k8s.io/v1alpha1","metadata":{"resourceVersion":"1"},"items":[]}`)
	}))
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() {
		cancel()
		srv.CloseClientConnections()
		srv.Close()
	})
	cs := fake.NewClientset()
	one := fakeHandle{config: &rest.Config{Host: srv.URL}, clientset: cs, factory: informers.NewSharedInformerFactory(cs, 0)}
	other := fakeHandle{config: one.config, clientset: cs, factory: informers.NewSharedInformerFactory(cs, 0)}

	var shared SharedSources
	first, err := shared.Get(ctx, one, false)
	require.NoError(t, err)
	again, err := shared.Get(ctx, one, false)
	require.NoError(t, err)
	require.Same(t, first, again, "a second plugin of the scheduler reuses its Sources")
	watched, note := first.Watched(Native)
	require.False(t, watched)
	require.Contains(t, note, "does not serve scheduling.k8s.io/v1beta1 podgroups")

	otherCtx, stopOther := context.WithCancel(ctx)
	second, err := shared.Get(otherCtx, other, false)
	require.NoError(t, err)
	require.NotSame(t, first, second, "another scheduler has Sources of its own")
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return lists.Load() == 2, nil
	}), "one PodGroup list per scheduler: %d", lists.Load())

	stopOther()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		_, kept := shared.byFactory[other.factory]
		return !kept, nil
	}), "a stopped scheduler's Sources are forgotten")
	require.EqualValues(t, 2, lists.Load())
}
