package coscheduling

// Membership: which pods are a gang's members, and how they count towards
// its quorum (gang.Census), from the scheduler's pod informer, indexed by
// gang, and an informer of the succeeded pods it leaves out.

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// startFinishedInformer watches succeeded pods, which the scheduler's own
// pod informer leaves out but quorum counts. It keeps only what counting
// needs of each pod.
func startFinishedInformer(ctx context.Context, handle fwk.Handle) (cache.Indexer, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(handle.ClientSet(), 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("status.phase", string(v1.PodSucceeded)).String()
		}))
	informer := factory.Core().V1().Pods().Informer()
	if err := informer.SetTransform(slimFinished); err != nil {
		return nil, fmt.Errorf("trimming finished pods: %w", err)
	}
	if err := informer.AddIndexers(cache.Indexers{gangIndex: indexByGang}); err != nil {
		return nil, fmt.Errorf("indexing finished pods by gang: %w", err)
	}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, gang.InformerSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		return nil, fmt.Errorf("succeeded pods could not be listed within %s: grant the scheduler list/watch on pods", gang.InformerSyncTimeout)
	}
	return informer.GetIndexer(), nil
}

// slimFinished keeps what counting a finished member needs, the gang it
// belongs to (its label or spec.schedulingGroup) among it.
func slimFinished(obj interface{}) (interface{}, error) {
	p, ok := obj.(*v1.Pod)
	if !ok {
		return obj, nil
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Labels: p.Labels,
			ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp},
		Spec:   v1.PodSpec{NodeName: p.Spec.NodeName, SchedulerName: p.Spec.SchedulerName, SchedulingGroup: p.Spec.SchedulingGroup},
		Status: v1.PodStatus{Phase: p.Status.Phase},
	}, nil
}

const gangIndex = "gpu-gang/gang"

func indexByGang(obj interface{}) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	if key, ok := gang.Of(pod); ok {
		return []string{key.String()}, nil
	}
	return nil, nil
}

// members lists a gang's live members: pods in the PodGroup's own namespace
// that belong to it (gang.Of), have not finished and are not being deleted.
// newPlugin adds the index or fails, so ByIndex cannot miss it.
func (pl *Plugin) members(key gang.Key) ([]*v1.Pod, error) {
	objs, err := pl.podIndex.ByIndex(gangIndex, key.String())
	if err != nil {
		return nil, fmt.Errorf("listing the members of gang %s: %w", key, err)
	}
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// census counts a gang's members: the live ones (reserved ones apart), and
// the succeeded ones.
func (pl *Plugin) census(key gang.Key, members []*v1.Pod) gang.Census {
	reserved := pl.gangs.reservations(key)
	live := make(map[types.UID]bool, len(members))
	var c gang.Census
	for _, p := range members {
		live[p.UID] = true
		if _, ok := reserved[p.UID]; ok && p.Spec.NodeName == "" {
			c.Reserved++
			continue
		}
		c.Add(p)
	}
	objs, _ := pl.finished.ByIndex(gangIndex, key.String())
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && !live[p.UID] && p.Status.Phase == v1.PodSucceeded && p.DeletionTimestamp == nil {
			c.Succeeded++
		}
	}
	return c
}

// running reports whether a gang is running: it reached quorum (in this
// scheduler, or its placed members show it) and some member still holds a
// node. A running gang's members that appear schedule one by one. Once no
// member holds a node, the next members are a new run of the job and gather
// as a whole again.
func (pl *Plugin) running(key gang.Key, spec *gang.Spec, c gang.Census) bool {
	if c.Bound+c.Reserved == 0 {
		pl.gangs.dropAdmission(key)
		return false
	}
	return pl.gangs.admitted(key) || gang.QuorumOf(spec.MinMember, c).Placed
}
