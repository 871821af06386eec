package gang

import (
	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// API is the API that defines a gang.
type API uint8

const (
	// XK8s is scheduler-plugins' PodGroup (scheduling.x-k8s.io/v1alpha1):
	// members carry the scheduling.x-k8s.io/pod-group label. It is the zero
	// value, so Key{Namespace: ns, Name: name} names such a PodGroup.
	XK8s API = iota
	// Native is Kubernetes' own PodGroup (scheduling.k8s.io/v1beta1):
	// members name it in spec.schedulingGroup.podGroupName.
	Native
	// Composite is Kubernetes' CompositePodGroup
	// (scheduling.k8s.io/v1alpha3): a group of native PodGroups and
	// composites that name it in spec.parentCompositePodGroupName. It has
	// no members of its own, so it is not in APIs: a Key of it names a node
	// of a hierarchy (Tree), never a pod's gang.
	Composite
)

// APIs lists every API whose PodGroups pods belong to, in the order their
// gangs are looked at.
var APIs = []API{XK8s, Native}

// String names the API's group and version.
func (a API) String() string {
	switch a {
	case Native:
		return "scheduling.k8s.io/v1beta1"
	case Composite:
		return "scheduling.k8s.io/v1alpha3"
	}
	return "scheduling.x-k8s.io/v1alpha1"
}

// Resource names the API's gang resource as resource.group, the way
// objects that point at a gang by name spell it
// ("podgroups.scheduling.x-k8s.io").
func (a API) Resource() string {
	switch a {
	case Native:
		return "podgroups.scheduling.k8s.io"
	case Composite:
		return "compositepodgroups.scheduling.k8s.io"
	}
	return "podgroups.scheduling.x-k8s.io"
}

// allAPIs are the APIs a Key may name, composites included.
var allAPIs = []API{XK8s, Native, Composite}

// APIOfResource is the API whose Resource is resource.
func APIOfResource(resource string) (API, bool) {
	for _, a := range allAPIs {
		if a.Resource() == resource {
			return a, true
		}
	}
	return 0, false
}

// Resources lists every API's Resource, for messages that say which are
// known.
func Resources() []string {
	out := make([]string, len(allAPIs))
	for i, a := range allAPIs {
		out[i] = a.Resource()
	}
	return out
}

// Key names a gang: a PodGroup of one API in a namespace; or, with API
// Composite, a CompositePodGroup.
type Key struct {
	// API is the API of the PodGroup; the zero value is XK8s.
	API       API
	Namespace string
	Name      string
}

// String renders the key as namespace/name, followed by the API for a
// native PodGroup and the kind for a composite, so that two gangs of the
// same name in the same namespace never look alike, in a log or in an
// index.
func (k Key) String() string {
	switch k.API {
	case Native:
		return k.Namespace + "/" + k.Name + " (" + k.API.String() + ")"
	case Composite:
		return k.Namespace + "/" + k.Name + " (CompositePodGroup " + k.API.String() + ")"
	}
	return k.Namespace + "/" + k.Name
}

// Of returns the gang a pod belongs to, if any, in the pod's own namespace.
// A pod that names a native PodGroup in spec.schedulingGroup belongs to it,
// whether or not it also carries the scheduling.x-k8s.io/pod-group label: a
// pod never counts in two gangs, and the field, which the API server makes
// immutable, wins over a label anyone may change. Otherwise the label names
// the scheduler-plugins PodGroup the pod belongs to.
func Of(pod *v1.Pod) (Key, bool) {
	if name := NativeName(pod); name != "" {
		return Key{API: Native, Namespace: pod.Namespace, Name: name}, true
	}
	return OfLabel(pod)
}

// OfLabel returns the scheduler-plugins PodGroup the pod's
// scheduling.x-k8s.io/pod-group label names, if any, whatever else the pod
// says. Only a pod carrying both a label and spec.schedulingGroup has an
// OfLabel that differs from Of; use it to say so.
func OfLabel(pod *v1.Pod) (Key, bool) {
	name := pod.Labels[scheduling.PodGroupLabel]
	if name == "" {
		return Key{}, false
	}
	return Key{Namespace: pod.Namespace, Name: name}, true
}

// NativeName returns the native PodGroup the pod's spec.schedulingGroup
// names, or "".
func NativeName(pod *v1.Pod) string {
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil {
		return *g.PodGroupName
	}
	return ""
}

// JoinedBy says how a pod joins the gang, for messages: "labelled
// scheduling.x-k8s.io/pod-group=job".
func (k Key) JoinedBy() string {
	switch k.API {
	case Native:
		return "whose spec.schedulingGroup.podGroupName is " + k.Name
	case Composite:
		return "of a PodGroup under CompositePodGroup " + k.Name
	}
	return "labelled " + scheduling.PodGroupLabel + "=" + k.Name
}

// HowToLeave says how a pod stops naming the gang, for messages that offer
// it as the other way out.
func (k Key) HowToLeave() string {
	switch k.API {
	case Native:
		return "recreate the pod without spec.schedulingGroup (the field cannot be changed)"
	case Composite:
		return "recreate the pod's PodGroup without spec.parentCompositePodGroupName (the field cannot be changed)"
	}
	return "remove the label " + scheduling.PodGroupLabel + " from the pod"
}
