package integration

// PodGroup-level claims (KEP-5729, the beta DRAWorkloadResourceClaims gate)
// on Kubernetes' own PodGroups, scheduled by gpu-gang.
//
// The control plane serves scheduling.k8s.io/v1beta1 with GenericWorkload
// and DRAWorkloadResourceClaims on, so the API server keeps a PodGroup's
// spec.resourceClaims and the resource claim controller (in this process,
// which has the server's gates) creates one claim per PodGroup claim from
// its template, owned by the PodGroup, and points the members' claims at
// it. The scheduler is the binary with the Deployment's
// --feature-gates=GenericWorkload=false. DRAWorkloadResourceClaims depends
// on GenericWorkload, so kube-scheduler refuses to start with it on there:
// its DynamicResources plugin runs with the gate off, reserves a shared
// claim for each member pod rather than for the PodGroup, and accepts a
// claim made from a template only if the pod owns it, which a PodGroup's
// claim is not: its PreEnqueue and queueing hints keep such members gated,
// with no Event and no condition.

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
	"github.com/gpu-gang/gpu-gang/pkg/gangtest"
)

// One PodGroup claim shared by the group's members. The shape: the pods of
// one serving replica (a prefill and a decode pod, say) share the 8 GPUs of
// one node through a claim their PodGroup holds, created once for the
// group (from a template, or named). As with any shared claim it is
// allocated once, on one node's devices, so the members land on that node,
// the only one here with 8 free GPUs, and the gang's demand is 8 GPUs in
// all.
func TestDRANativePodGroupClaims(t *testing.T) {
	useNativeControlPlaneWith(t, controlplane.NativePodGroupDRAAPIFlags())
	startNativeScheduler(t)

	for _, tc := range []struct {
		name  string
		claim func(env *draEnv) schedulingv1beta1.PodGroupResourceClaim
	}{{
		name: "from a template",
		claim: func(env *draEnv) schedulingv1beta1.PodGroupResourceClaim {
			return schedulingv1beta1.PodGroupResourceClaim{Name: "gpus", ResourceClaimTemplateName: ptr.To(wholeH100Node)}
		},
	}, {
		name: "named",
		claim: func(env *draEnv) schedulingv1beta1.PodGroupResourceClaim {
			env.createClaim("serve-gpus", gpuClaimSpec(8))
			return schedulingv1beta1.PodGroupResourceClaim{Name: "gpus", ResourceClaimName: ptr.To("serve-gpus")}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			env := newDRAEnv(t, gpuClass(true))
			env.draNodes(h100DRA, "n0", "n1", "n2")
			env.createClaimTemplate("gpu-2", gpuClaimSpec(2))
			env.occupyDevices("gpu-2", "n0", "n1")
			env.createClaimTemplate(wholeH100Node, gpuClaimSpec(8))
			watch := env.watchGangs(map[string]int{"serve": 2})

			groupClaim := tc.claim(env)
			pg := gangtest.MakeNativePodGroup("serve", env.ns).MinCount(2).Obj()
			pg.Spec.ResourceClaims = []schedulingv1beta1.PodGroupResourceClaim{groupClaim}
			if created := env.createNativePodGroup(pg); len(created.Spec.ResourceClaims) != 1 {
				t.Fatalf("the API server dropped the PodGroup's resourceClaims (is DRAWorkloadResourceClaims on?): %+v", created.Spec)
			}
			podClaim := v1.PodResourceClaim{Name: groupClaim.Name, ResourceClaimName: groupClaim.ResourceClaimName, ResourceClaimTemplateName: groupClaim.ResourceClaimTemplateName}
			start := time.Now()
			pods := make([]*v1.Pod, 2)
			for i := range pods {
				pods[i] = withClaims(gangtest.InNativeGroup(env.pod(fmt.Sprintf("serve-%d", i)).Res(cpuOnly()).Obj(), "serve"), podClaim)
			}
			env.createPods(pods...)
			shared := env.waitForPodGroupClaim("serve", groupClaim)

			nodes := env.expectBoundWithin(start, draBindBound, pods...)
			env.expectShareClaimOn(nodes, "n2", shared, pods...)
			env.expectNoDRARejections(pods...)
			watch.expectNeverPartial()
		})
	}
}

// waitForPodGroupClaim waits until the claim of the native PodGroup exists,
// created by the claim controller for a template claim, and returns its
// name.
func (env *draEnv) waitForPodGroupClaim(group string, claim schedulingv1beta1.PodGroupResourceClaim) string {
	env.t.Helper()
	if claim.ResourceClaimName != nil {
		return *claim.ResourceClaimName
	}
	var name string
	err := waitFor(env.t.Context(), claimTimeout, func(ctx context.Context) (bool, error) {
		pg, err := kubeClient.SchedulingV1beta1().PodGroups(env.ns).Get(ctx, group, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range pg.Status.ResourceClaimStatuses {
			if s.Name == claim.Name && s.ResourceClaimName != nil {
				name = *s.ResourceClaimName
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		env.t.Fatalf("waiting %s for the claim controller to create PodGroup %s's claim %s: %v", claimTimeout, group, claim.Name, err)
	}
	c, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Get(env.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		env.t.Fatalf("reading PodGroup %s's claim %s: %v", group, name, err)
	}
	if ref := metav1.GetControllerOf(c); ref == nil || ref.Kind != "PodGroup" || ref.Name != group {
		env.t.Errorf("claim %s is controlled by %+v, want PodGroup %s", name, ref, group)
	}
	return name
}
