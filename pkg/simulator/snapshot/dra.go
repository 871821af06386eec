package snapshot

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// DRACommand is Command for a cluster whose GPUs reach pods through Dynamic
// Resource Allocation: it adds the ResourceSlices that publish devices, the
// DeviceClasses that select them, and the claims and claim templates pods
// take them through.
const DRACommand = "kubectl get nodes,pods,podgroups.scheduling.x-k8s.io,resourceslices,deviceclasses,resourceclaims,resourceclaimtemplates -A -o yaml"

// DRA holds a snapshot's Dynamic Resource Allocation objects
// (resource.k8s.io/v1), as listed.
type DRA struct {
	Slices    []*resourceapi.ResourceSlice
	Classes   []*resourceapi.DeviceClass
	Claims    []*resourceapi.ResourceClaim
	Templates []*resourceapi.ResourceClaimTemplate
}

// Len is how many objects d holds.
func (d *DRA) Len() int {
	return len(d.Slices) + len(d.Classes) + len(d.Claims) + len(d.Templates)
}

// draKind is the kind an item of resource.k8s.io/v1 has in a snapshot.
func draKind(kind string) string { return resourceapi.SchemeGroupVersion.String() + " " + kind }

// read adds it to d if it is a DRA object, and reports whether it was.
func (d *DRA) read(it item, errs *[]error) bool {
	switch it.kind {
	case draKind("ResourceSlice"):
		if o := decode[resourceapi.ResourceSlice](it, errs); o != nil {
			d.Slices = append(d.Slices, o)
		}
	case draKind("DeviceClass"):
		if o := decode[resourceapi.DeviceClass](it, errs); o != nil {
			d.Classes = append(d.Classes, o)
		}
	case draKind("ResourceClaim"):
		if o := decode[resourceapi.ResourceClaim](it, errs); o != nil {
			d.Claims = append(d.Claims, o)
		}
	case draKind("ResourceClaimTemplate"):
		if o := decode[resourceapi.ResourceClaimTemplate](it, errs); o != nil {
			d.Templates = append(d.Templates, o)
		}
	default:
		return false
	}
	return true
}

// fetchDRA adds the cluster's DRA objects to list. A cluster that does not
// serve resource.k8s.io/v1 has none.
func fetchDRA(ctx context.Context, kube kubernetes.Interface, list *metav1.List) error {
	api := kube.ResourceV1()
	all := metav1.ListOptions{}
	slices, err := api.ResourceSlices().List(ctx, all)
	if err := addListed(list, "ResourceSlice", slices, err, func(l *resourceapi.ResourceSliceList) []resourceapi.ResourceSlice { return l.Items }); err != nil {
		return err
	}
	classes, err := api.DeviceClasses().List(ctx, all)
	if err := addListed(list, "DeviceClass", classes, err, func(l *resourceapi.DeviceClassList) []resourceapi.DeviceClass { return l.Items }); err != nil {
		return err
	}
	claims, err := api.ResourceClaims(metav1.NamespaceAll).List(ctx, all)
	if err := addListed(list, "ResourceClaim", claims, err, func(l *resourceapi.ResourceClaimList) []resourceapi.ResourceClaim { return l.Items }); err != nil {
		return err
	}
	templates, err := api.ResourceClaimTemplates(metav1.NamespaceAll).List(ctx, all)
	return addListed(list, "ResourceClaimTemplate", templates, err, func(l *resourceapi.ResourceClaimTemplateList) []resourceapi.ResourceClaimTemplate { return l.Items })
}

// addListed adds the items of a List of kind (of resource.k8s.io/v1) that
// listing returned, or returns why listing failed. A resource the cluster
// does not serve is no error.
func addListed[L any, T any, P interface {
	*T
	runtime.Object
}](list *metav1.List, kind string, l *L, err error, items func(*L) []T) error {
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return nil
	case err != nil:
		return fmt.Errorf("listing %s %ss: %w", resourceapi.SchemeGroupVersion, kind, err)
	}
	objs := items(l)
	for i := range objs {
		o := P(&objs[i])
		o.GetObjectKind().SetGroupVersionKind(resourceapi.SchemeGroupVersion.WithKind(kind))
		if err := add(list, o); err != nil {
			return err
		}
	}
	return nil
}
