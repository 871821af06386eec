package gang

import (
	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Key names a gang: a PodGroup in a namespace.
type Key struct {
	Namespace string
	Name      string
}

// String renders the key as namespace/name.
func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Of returns the gang a pod belongs to, if any: the PodGroup its
// scheduling.x-k8s.io/pod-group label names, in the pod's own namespace.
func Of(pod *v1.Pod) (Key, bool) {
	name := pod.Labels[scheduling.PodGroupLabel]
	if name == "" {
		return Key{}, false
	}
	return Key{Namespace: pod.Namespace, Name: name}, true
}
