package gangtest

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
)

// NewPodGroupInformer returns an informer on the scheduler-plugins PodGroups
// client serves, for the caller to run: in tests, client is the generated
// fake clientset. That clientset cannot serve the watch-list stream
// client-go's reflector asks for by default, so the informer lists and then
// watches, as reflectors did before it. Like the generated informer, it
// indexes PodGroups by namespace, which their lister needs.
func NewPodGroupInformer(client pgclientset.Interface) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).Watch(ctx, opts)
		},
	}
	return cache.NewSharedIndexInformer(listThenWatch{lw}, &v1alpha1.PodGroup{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// listThenWatch tells the reflector not to ask for a watch-list stream.
type listThenWatch struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported is what client-go's reflector asks.
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }
