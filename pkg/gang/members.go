package gang

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// MemberIndex names the index of a pod informer by gang: a pod's value is
// the Key.String of its gang (Of), so that a gang's members are found
// without scanning its namespace. Every plugin of a scheduler reads the
// one pod informer the scheduler shares, through this one index.
const MemberIndex = "gpu-gang/gang"

// IndexMembers adds MemberIndex to a pod informer, unless a plugin built
// before (of this profile or another) did: the framework builds plugins
// one after another, so looking and adding do not race.
func IndexMembers(informer cache.SharedIndexInformer) error {
	if _, ok := informer.GetIndexer().GetIndexers()[MemberIndex]; ok {
		return nil
	}
	if err := informer.AddIndexers(cache.Indexers{MemberIndex: indexByGang}); err != nil {
		return fmt.Errorf("indexing pods by gang: %w", err)
	}
	return nil
}

func indexByGang(obj interface{}) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	if key, ok := Of(pod); ok {
		return []string{key.String()}, nil
	}
	return nil, nil
}

// Members lists a gang's live members from an indexer that has
// MemberIndex (IndexMembers): the pods that belong to it and are not being
// deleted. The scheduler's informer holds no finished pods, so neither
// does the list it gives.
func Members(indexer cache.Indexer, key Key) ([]*v1.Pod, error) {
	objs, err := indexer.ByIndex(MemberIndex, key.String())
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

// Waiting picks, of a gang's members, those that have no node yet: the
// ones in the scheduling queue, which a change to their gang may let
// through. They are keyed by namespace/name, as the framework's
// Handle.Activate takes them.
func Waiting(members []*v1.Pod) map[string]*v1.Pod {
	pods := map[string]*v1.Pod{}
	for _, p := range members {
		if p.Spec.NodeName == "" {
			pods[p.Namespace+"/"+p.Name] = p
		}
	}
	return pods
}
