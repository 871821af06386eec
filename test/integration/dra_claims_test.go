package integration

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
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
	createAdmissionRefusal(t, r.name,
		admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"resource.k8s.io"}, APIVersions: []string{"*"},
				Resources: []string{"resourceclaims/status"}},
		},
		fmt.Sprintf("object.metadata.namespace != %q || !has(oldObject.status) || !has(oldObject.status.allocation) || (has(object.status) && has(object.status.allocation))", env.ns),
		"releasing an allocation refused by the test's admission policy")

	probe := env.releaseProbe(r.lift)
	claims := kubeClient.ResourceV1().ResourceClaims(env.ns)
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

// releaseProbe creates a claim allocated by hand, with which a test
// probes that admission of deallocations took effect. It names a node that
// does not exist: it takes no devices. When the test ends, stop ends what
// the probe probed, and the probe's allocation goes, so that the claim
// controller lets the claim be deleted.
func (env *draEnv) releaseProbe(stop func()) string {
	env.t.Helper()
	t := env.t
	probe := env.allocateOutsideScheduler("release-probe", "probe", 1)
	claims := kubeClient.ResourceV1().ResourceClaims(env.ns)
	t.Cleanup(func() {
		stop()
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
	return probe
}

// lift ends the refusal.
func (r *claimReleaseRefusal) lift() { liftAdmissionRefusal(r.name) }

// A release racing a re-attempt never leaves a member unbound while its
// siblings run. Two members share a claim gpu-gang allocated and wait in
// Permit for a third, held back; one of them is deleted and replaced at
// once, which fails the attempt without a penalty. The API server is slow
// to take the allocation away (a webhook holds the first such request for
// claimReleaseDelay), so the gang's next attempt runs while that release is
// on its way. Then the third member is let go. Every member must bind, and
// the gang never be seen part-bound beyond the bind grace: the next attempt
// waits for the release and allocates afresh, and never plans with the
// allocation the release is taking away (whose sharers would then fail to
// bind beside a sibling that did).
func TestDRAReleaseRacingReattempt(t *testing.T) {
	withHoldPlugin(t)
	env := newDRAEnv(t, gpuClass(true))
	env.draNodes(h100DRA, "n0")
	env.createClaim("node-gpus", gpuClaimSpec(8))
	ledger := env.ledgerGangs(bindGrace, map[string]int{"rl": 3})
	pods, _ := env.sharedClaimGangInPermit("rl", "node-gpus")

	slow := env.slowClaimReleases("node-gpus", claimReleaseDelay)
	env.deleteAndWait(pods[0])
	env.createPods(replacement(pods[0]))
	slow.waitAnswered(t, claimReleaseDelay+eventTimeout)
	// The next attempt's sharers wait in Permit again, for the third.
	waitForGauge(t, "gpu_gang_members_waiting_in_permit", 2)
	env.release(pods[2].Name)
	env.waitForBound(retryBindTimeout, pods...)
	c, err := kubeClient.ResourceV1().ResourceClaims(env.ns).Get(t.Context(), "node-gpus", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Allocation == nil || len(c.Status.ReservedFor) != 2 {
		t.Errorf("claim node-gpus after the gang bound: allocated %v, reserved by %v", c.Status.Allocation != nil, consumers(c))
	}
	ledger.expectNoHalfBound()
}

// claimReleaseDelay is how long the webhook of TestDRAReleaseRacingReattempt
// holds the first request that takes the claim's allocation away.
const claimReleaseDelay = 4 * time.Second

// slowRelease is a validating webhook that holds the first request that
// takes one claim's allocation away, then allows it.
type slowRelease struct {
	mu       sync.Mutex
	held     bool
	answered chan struct{}
	probed   chan struct{}
}

// slowClaimReleases registers a webhook for claim's deallocation in env's
// namespace that answers the first one after delay, and waits until the
// API server calls it (probing with a claim allocated by hand).
func (env *draEnv) slowClaimReleases(claim string, delay time.Duration) *slowRelease {
	env.t.Helper()
	t := env.t
	s := &slowRelease{answered: make(chan struct{}), probed: make(chan struct{})}
	var probeOnce sync.Once
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		switch review.Request.Name {
		case claim:
			s.mu.Lock()
			first := !s.held
			s.held = true
			s.mu.Unlock()
			if first {
				time.Sleep(delay)
				defer close(s.answered)
			}
		default:
			probeOnce.Do(func() { close(s.probed) })
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	name := "slow-claim-releases-" + env.ns
	url := srv.URL + "/validate"
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "slow-claim-releases.integration.gpu-gang.x-k8s.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			TimeoutSeconds:          ptr.To[int32](15),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": env.ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"resource.k8s.io"}, APIVersions: []string{"*"},
					Resources: []string{"resourceclaims/status"}},
			}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name:       "deallocates",
				Expression: "has(oldObject.status) && has(oldObject.status.allocation) && (!has(object.status) || !has(object.status.allocation))",
			}},
		}},
	}
	api := kubeClient.AdmissionregistrationV1()
	if _, err := api.ValidatingWebhookConfigurations().Create(t.Context(), hook, metav1.CreateOptions{}); err != nil {
		t.Fatalf("registering the webhook: %v", err)
	}
	t.Cleanup(func() {
		_ = api.ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	probe := env.releaseProbe(func() {
		_ = api.ValidatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	claims := kubeClient.ResourceV1().ResourceClaims(env.ns)
	err := waitFor(t.Context(), bindTimeout, func(ctx context.Context) (bool, error) {
		c, err := claims.Get(ctx, probe, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c.Status.ReservedFor, c.Status.Allocation = nil, nil
		if _, err := claims.UpdateStatus(ctx, c, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return false, err
		}
		select {
		case <-s.probed:
			return true, nil
		default:
			return false, nil
		}
	})
	if err != nil {
		t.Fatalf("the webhook was never called: %v", err)
	}
	return s
}

// waitAnswered waits until the webhook has answered the request it held.
func (s *slowRelease) waitAnswered(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-s.answered:
	case <-time.After(timeout):
		t.Fatalf("no release of the claim reached the webhook within %s", timeout)
	}
}
