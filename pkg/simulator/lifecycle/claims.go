package lifecycle

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/controller/resourceclaim"
)

// claimWorkers is kube-controller-manager's default for
// --concurrent-resourceclaim-syncs.
const claimWorkers = 50

// ClaimController is Kubernetes' own resourceclaim controller, which
// kube-controller-manager runs in a cluster and the simulator's control
// plane does not. It creates each pod's ResourceClaims from their
// ResourceClaimTemplates (and records their names in the pod's status,
// where the scheduler waits for them), reserves an allocated claim for a
// pod bound to its node, and, once a pod is done (kwok marks it
// Succeeded) or deleted, removes the pod from its claims' reservations,
// clears the allocation of a claim no pod uses any more, so that its
// devices are free again, and deletes the claims made for the pod: those
// from templates and those the scheduler made for DRA-backed extended
// resources. Every profile runs it alike.
type ClaimController struct {
	cancel  context.CancelFunc
	factory informers.SharedInformerFactory
	wg      sync.WaitGroup
}

// StartClaimController runs the controller on namespace's pods, claims and
// templates with client, and returns once its caches have synced. It reads
// feature gates as kube-controller-manager would, from this process's
// (which are the in-process kube-apiserver's).
func StartClaimController(ctx context.Context, client kubernetes.Interface, namespace string) (*ClaimController, error) {
	ctx, cancel := context.WithCancel(ctx)
	logger := klog.LoggerWithName(klog.FromContext(ctx), "resourceclaim-controller")
	ctx = klog.NewContext(ctx, logger)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	pods := factory.Core().V1().Pods()
	claims := factory.Resource().V1().ResourceClaims()
	templates := factory.Resource().V1().ResourceClaimTemplates()
	// The PodGroup informer is only started when the GenericWorkload gate
	// makes the controller read PodGroups (the in-tree profile's), and
	// then the API server serves them.
	ctrl, err := resourceclaim.NewController(logger, client, pods, factory.Scheduling().V1beta1().PodGroups(), claims, templates)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("creating the resourceclaim controller: %w", err)
	}
	c := &ClaimController{cancel: cancel, factory: factory}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			c.Stop()
			return nil, fmt.Errorf("the resourceclaim controller's %v informer did not sync", typ)
		}
	}
	c.wg.Go(func() { ctrl.Run(ctx, claimWorkers) })
	return c, nil
}

// Stop ends the controller and its informers and waits for them.
func (c *ClaimController) Stop() {
	c.cancel()
	c.wg.Wait()
	c.factory.Shutdown()
}
