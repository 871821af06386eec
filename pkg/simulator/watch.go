package simulator

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
)

// podObserver is fed every pod event: Tracker, PreemptionTracker,
// HierarchyTracker and, where the workload asks for it, DomainTracker.
type podObserver interface {
	Observe(pod *v1.Pod, now time.Time)
	ObserveDelete(pod *v1.Pod, now time.Time)
}

// watchPods feeds every pod event in the namespace to the trackers, in the
// order the watch delivers them, each stamped with the time it arrived, and
// returns once the initial list is in.
func watchPods(ctx context.Context, kube kubernetes.Interface, trackers ...podObserver) (stop func(), err error) {
	pods := func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().Pods().Informer()
	}
	return watch(ctx, kube, "pod", pods,
		func(pod *v1.Pod) {
			now := time.Now()
			for _, t := range trackers {
				t.Observe(pod, now)
			}
		},
		func(pod *v1.Pod) {
			now := time.Now()
			for _, t := range trackers {
				t.ObserveDelete(pod, now)
			}
		})
}

// watchClaims feeds every ResourceClaim event in the namespace to counter
// and returns once the initial list is in.
func watchClaims(ctx context.Context, kube kubernetes.Interface, counter *metrics.ClaimCounter) (stop func(), err error) {
	claims := func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Resource().V1().ResourceClaims().Informer()
	}
	return watch(ctx, kube, "ResourceClaim", claims, counter.Observe, counter.ObserveDelete)
}

// watch runs one informer of the namespace's objects of type T, feeds each
// added or updated object to observe and each deleted one to gone, in the
// order the watch delivers them, and returns once the initial list is in.
func watch[T any](ctx context.Context, kube kubernetes.Interface, what string,
	informerOf func(informers.SharedInformerFactory) cache.SharedIndexInformer, observe, gone func(T)) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(Namespace))
	informer := informerOf(factory)
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(T); ok {
				observe(o)
			}
		},
		UpdateFunc: func(_, obj any) {
			if o, ok := obj.(T); ok {
				observe(o)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if o, ok := obj.(T); ok {
				gone(o)
			}
		},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		cancel()
		factory.Shutdown()
		return nil, fmt.Errorf("the %s watch did not sync", what)
	}
	return func() { cancel(); factory.Shutdown() }, nil
}
