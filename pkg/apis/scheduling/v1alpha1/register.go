package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	upstream "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// SchemeGroupVersion is scheduler-plugins' group and version.
var SchemeGroupVersion = upstream.SchemeGroupVersion

var (
	// SchemeBuilder registers this package's PodGroup types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme registers this package's PodGroup types with a scheme.
	// A scheme maps a kind to one Go type: do not also add
	// scheduler-plugins' types for this group and version to it.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &PodGroup{}, &PodGroupList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

// Resource returns the group and resource for a resource name, such as
// "podgroups".
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}
