package workload

import (
	"context"
	"fmt"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// warmUpName names the PodGroup WarmUp creates and deletes.
const warmUpName = "warm-up"

// WarmUp creates and deletes one PodGroup of the builder's flavor before the
// clock starts. kube-apiserver answers the first create of a custom resource
// only after about two seconds; without this, that one-time cost would land
// on the first gang of the gpu-gang profile alone. Native PodGroups get the
// same treatment so that every profile starts equally warm.
func (s *Submitter) WarmUp(ctx context.Context) error {
	ns := s.Builder.Namespace
	switch s.Builder.Flavor {
	case GangPlugin:
		groups := s.Groups.SchedulingV1alpha1().PodGroups(ns)
		pg := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: warmUpName}, Spec: v1alpha1.PodGroupSpec{MinMember: 1}}
		if _, err := groups.Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the warm-up PodGroup: %w", err)
		}
		if err := groups.Delete(ctx, warmUpName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the warm-up PodGroup: %w", err)
		}
	case Native:
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: warmUpName},
			Spec: schedulingv1beta1.PodGroupSpec{
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 1}},
			},
		}
		if _, err := s.Kube.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the warm-up PodGroup: %w", err)
		}
		return s.deleteNativePodGroup(ctx, warmUpName)
	}
	return nil
}

// deleteNativePodGroup deletes a scheduling.k8s.io/v1beta1 PodGroup and
// removes its finalizers. kube-apiserver adds
// scheduling.k8s.io/podgroup-protection to every PodGroup, and the
// controller that would lift it once no pod uses the group runs in
// kube-controller-manager, which this control plane does not run; without
// the patch the PodGroup would stay, terminating, forever.
func (s *Submitter) deleteNativePodGroup(ctx context.Context, name string) error {
	groups := s.Kube.SchedulingV1beta1().PodGroups(s.Builder.Namespace)
	if err := groups.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting PodGroup %s: %w", name, err)
	}
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := groups.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing the finalizers of PodGroup %s: %w", name, err)
	}
	return nil
}
