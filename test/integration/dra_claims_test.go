package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/coscheduling/dra"
)

// What gpu-gang writes on the claims its gangs share, and how it gives
// them back (docs/dra.md): every allocation it writes carries its mark, and
// a release that the API server refuses is kept and tried again, never
// forgotten with the allocation left behind.

// claimReleaseTimeout bounds the release of a refused claim once the
// refusal ends: the first retry comes 5 s after the refusal, the second 10 s
// after that.
const claimReleaseTimeout = 30 * time.Second

// sharedClaimGangInPermit starts gang name of three members, minMember 3:
// the first two share the 8-GPU claim claim, the third (CPU only) is held
// back (holdLabel), so that the two wait in Permit with the claim
// allocated by the plugin. It returns the members once the claim carries
// gpu-gang's mark and both wait.
func (env *draEnv) sharedClaimGangInPermit(name, claim string) ([]*v1.Pod, *resourceapi.ResourceClaim) {
	env.t.Helper()
	env.createGangPodGroup(name, 3, nil)
	pods := make([]*v1.Pod, 3)
	for i := range pods {
		pods[i] = env.gangPod(fmt.Sprintf("%s-%d", name, i), name).Res(cpuOnly()).Obj()
		if i < 2 {
			pods[i] = withClaims(pods[i], namedClaim("gpus", claim))
		} else {
			pods[i].Labels[holdLabel] = "true"
		}
	}
	env.createPods(pods...)
	waitForGauge(env.t, "gpu_gang_members_waiting_in_permit", 2)
	c, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Get(env.t.Context(), claim, metav1.GetOptions{})
	if err != nil {
		env.t.Fatal(err)
	}
	m, ok, err := dra.MarkOf(c)
	if c.Status.Allocation == nil || !ok || err != nil || m.Gang.Name != name {
		env.t.Fatalf("claim %s while its sharers wait in Permit: allocated %v, mark %+v (%v, %v); want allocated and marked for %s",
			claim, c.Status.Allocation != nil, m, ok, err, name)
	}
	env.t.Logf("claim %s allocated by gpu-gang: %s=%s, %s=%s", claim, scheduling.AnnotationClaimAllocatedFor, c.Annotations[scheduling.AnnotationClaimAllocatedFor],
		scheduling.AnnotationClaimAllocationAttempt, c.Annotations[scheduling.AnnotationClaimAllocationAttempt])
	return pods, c
}

// waitForClaimReleased waits until claim has no allocation, no mark and no
// finalizer.
func (env *draEnv) waitForClaimReleased(timeout time.Duration, claim string) {
	env.t.Helper()
	var last *resourceapi.ResourceClaim
	err := waitFor(env.t.Context(), timeout, func(ctx context.Context) (bool, error) {
		c, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = c
		_, marked, _ := dra.MarkOf(c)
		return c.Status.Allocation == nil && !marked && len(c.Finalizers) == 0, nil
	})
	if err != nil {
		env.t.Fatalf("claim %s was not given back within %s: %v; last seen: allocated %v, annotations %v, finalizers %v",
			claim, timeout, err, last != nil && last.Status.Allocation != nil, last.GetAnnotations(), last.GetFinalizers())
	}
}

// A release the API server refuses is retried: two members that share a
// claim gpu-gang allocated wait in Permit; the API server refuses to take
// any allocation away in the namespace (an admission policy, as a webhook
// or a quota might); a member is deleted, which fails the attempt. The
// claim keeps its allocation and its mark, with a ClaimReleaseFailed Event;
// once the refusal ends, the release is tried again and the claim is free,
// with a ClaimReleased Event naming the gang.
func TestDRAClaimReleaseRefusedIsRetried(t *testing.T) {
	withHoldPlugin(t)
	env := newDRAEnv(t, gpuClass(true))
	env.draNodes(h100DRA, "n0")
	env.createClaim("node-gpus", gpuClaimSpec(8))
	pods, _ := env.sharedClaimGangInPermit("rl", "node-gpus")

	refusal := env.refuseClaimReleases()
	env.deleteAndWait(pods[0])
	ev := env.waitForEvent("ResourceClaim", "node-gpus", dra.ReasonClaimReleaseFailed)
	t.Logf("the claim says: %s", ev.Note)
	c, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Get(t.Context(), "node-gpus", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, marked, _ := dra.MarkOf(c); c.Status.Allocation == nil || !marked {
		t.Fatalf("a refused release changed the claim: allocated %v, marked %v; the mark must stay for a later release", c.Status.Allocation != nil, marked)
	}

	start := time.Now()
	refusal.lift()
	env.waitForClaimReleased(claimReleaseTimeout, "node-gpus")
	t.Logf("claim given back %s after the refusal ended", time.Since(start).Round(time.Millisecond))
	ev = env.waitForEvent("ResourceClaim", "node-gpus", dra.ReasonClaimReleased)
	t.Logf("the claim says: %s", ev.Note)
}

// claimReleaseRefusal is a ValidatingAdmissionPolicy that refuses, in one
// namespace, every update that takes a ResourceClaim's allocation away.
type claimReleaseRefusal struct{ name string }

// refuseClaimReleases makes the API server refuse to take an allocation
// away from a claim of env's namespace, and waits until it does (policies
// take effect asynchronously), probing with a claim allocated by hand.
func (env *draEnv) refuseClaimReleases() *claimReleaseRefusal {
	env.t.Helper()
	t := env.t
	r := &claimReleaseRefusal{name: "refuse-claim-releases-" + env.ns}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: r.name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"resource.k8s.io"}, APIVersions: []string{"*"},
						Resources: []string{"resourceclaims/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.namespace != %q || !has(oldObject.status) || !has(oldObject.status.allocation) || (has(object.status) && has(object.status.allocation))", env.ns),
				Message:    "releasing an allocation refused by the test's admission policy",
			}},
		},
	}
	vapb := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: r.name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        r.name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	api := kubeClient.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(t.Context(), vap, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the admission policy: %v", err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(t.Context(), vapb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("binding the admission policy: %v", err)
	}
	t.Cleanup(r.lift)

	// The probe names a node that does not exist: it takes no devices.
	probe := env.allocateOutsideScheduler("release-probe", "probe", 1)
	claims := kubeClient.ResourceV1().ResourceClaims(env.ns)
	t.Cleanup(func() {
		// Once the refusal is lifted, the probe's allocation goes, so that
		// the claim controller lets the claim be deleted.
		r.lift()
		err := waitFor(context.Background(), bindTimeout, func(ctx context.Context) (bool, error) {
			c, err := claims.Get(ctx, probe, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c.Status.ReservedFor, c.Status.Allocation = nil, nil
			_, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Errorf("giving back the probe claim %s: %v", probe, err)
		}
	})
	err := waitFor(t.Context(), bindTimeout, func(ctx context.Context) (bool, error) {
		c, err := claims.Get(ctx, probe, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c.Status.ReservedFor, c.Status.Allocation = nil, nil
		_, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "refused by the test's admission policy"), nil
	})
	if err != nil {
		t.Fatalf("the admission policy never took effect: %v", err)
	}
	return r
}

// lift ends the refusal.
func (r *claimReleaseRefusal) lift() {
	api := kubeClient.AdmissionregistrationV1()
	ctx := context.Background()
	_ = api.ValidatingAdmissionPolicyBindings().Delete(ctx, r.name, metav1.DeleteOptions{})
	_ = api.ValidatingAdmissionPolicies().Delete(ctx, r.name, metav1.DeleteOptions{})
}
