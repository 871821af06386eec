package gang

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// PodGroupResource is the scheduler-plugins PodGroup CRD as kube-scheduler's
// queue names it in a cluster event: <plural>.<version>.<group>. A plugin
// that registers it has the scheduler watch PodGroups with a dynamic
// informer of its own, apart from Sources, which may be behind it: what a
// plugin reads then is Sources' concern (Subscribe).
const PodGroupResource fwk.EventResource = "podgroups.v1alpha1.scheduling.x-k8s.io"

// QueueHearsEvents reports whether kube-scheduler's queue hears the API's
// events itself, through a cluster event a plugin registers
// (PodGroupResource). Native PodGroups have none: kube-scheduler registers
// its handlers for them only with the GenericWorkload feature gate on, which
// gpu-gang runs without (see DecideNative), and a dynamic informer would be
// a second copy of every PodGroup. Plugins follow such an API through
// Sources.Subscribe and activate the members a change concerns themselves.
func (a API) QueueHearsEvents() bool { return a == XK8s }

// IsOwnPodGroup is the queueing hint of PodGroupResource events: it queues a
// member when its own scheduler-plugins PodGroup is created or changed.
func IsOwnPodGroup(logger klog.Logger, pod *v1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	key, ok := Of(pod)
	if !ok || key.API != XK8s {
		return fwk.QueueSkip, nil
	}
	obj, err := meta.Accessor(newObj)
	if err != nil {
		return fwk.Queue, fmt.Errorf("reading PodGroup metadata: %w", err)
	}
	if obj.GetNamespace() == key.Namespace && obj.GetName() == key.Name {
		logger.V(5).Info("PodGroup changed, requeueing member", "pod", klog.KObj(pod), "podGroup", key)
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
