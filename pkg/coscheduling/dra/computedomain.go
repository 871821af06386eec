package dra

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/gpu-gang/gpu-gang/pkg/computedomain"
)

// ComputeDomainOf returns the ComputeDomain whose channel one of the
// pod's claims takes (computedomain.Classify), "" if none does. A daemon
// claim makes no member.
func (s *DeviceSource) ComputeDomainOf(pod *v1.Pod) string {
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil || name == nil {
			continue
		}
		claim, err := s.manager.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil {
			continue
		}
		c := computedomain.Classify(claim)
		switch {
		case c.Role != computedomain.Channel:
			continue
		case c.Domain != "":
			return c.Domain
		case pc.ResourceClaimTemplateName != nil:
			// Every pod's claim from one template is one domain's channel.
			return "template " + types.NamespacedName{Namespace: pod.Namespace, Name: *pc.ResourceClaimTemplateName}.String()
		}
		return "claim " + types.NamespacedName{Namespace: pod.Namespace, Name: *name}.String()
	}
	return ""
}
