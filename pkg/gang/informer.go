package gang

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	pginformers "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	pglisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"
)

// InformerSyncTimeout bounds how long StartPodGroupInformer waits for the
// first list of PodGroups.
const InformerSyncTimeout = 30 * time.Second

// StartPodGroupInformer starts an informer on scheduler-plugins PodGroups,
// on a JSON client (PodGroups are a CRD, which protobuf cannot carry), and
// waits for it to sync. transform, when not nil, trims what the informer
// keeps. A PodGroup API that cannot be listed is an error that says how to
// fix it. The scheduler's plugins call it from their New.
func StartPodGroupInformer(ctx context.Context, kubeConfig *rest.Config, transform cache.TransformFunc) (pglisters.PodGroupLister, cache.SharedIndexInformer, error) {
	if kubeConfig == nil {
		return nil, nil, errors.New("the framework handle has no kubeconfig to watch PodGroups with")
	}
	cfg := rest.CopyConfig(kubeConfig)
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	client, err := pgclientset.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("building PodGroup client: %w", err)
	}
	factory := pginformers.NewSharedInformerFactory(client, 0)
	pgInformer := factory.Scheduling().V1alpha1().PodGroups()
	informer := pgInformer.Informer()
	if transform != nil {
		if err := informer.SetTransform(transform); err != nil {
			return nil, nil, fmt.Errorf("trimming PodGroups: %w", err)
		}
	}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, InformerSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return nil, nil, fmt.Errorf("PodGroups (%s) could not be listed within %s: install the CRD from manifests/crds and grant the scheduler list/watch on podgroups",
			v1alpha1.SchemeGroupVersion.WithResource("podgroups"), InformerSyncTimeout)
	}
	return pgInformer.Lister(), informer, nil
}
