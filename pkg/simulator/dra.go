package simulator

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/lifecycle"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// draRun is what a run on a fabric with DRA nodes adds: the resourceclaim
// controller, which kube-controller-manager would run, and a watch that
// counts the workload's claims. On a fabric without DRA nodes it is empty:
// no pod there can use a claim, and nothing runs that the earlier
// scenarios did not.
type draRun struct {
	controller *lifecycle.ClaimController
	stopWatch  func()
	// claims is nil without DRA nodes; its Summary is then nil too.
	claims *metrics.ClaimCounter
}

// startDRA starts the resourceclaim controller and the claim watch when
// the layout has DRA nodes, before pre-fill and the workload need them.
func startDRA(ctx context.Context, kube kubernetes.Interface, layout *fabric.Layout) (*draRun, error) {
	d := &draRun{}
	if nodes, _ := layout.DRANodes(); nodes == 0 {
		return d, nil
	}
	controller, err := lifecycle.StartClaimController(ctx, kube, Namespace)
	if err != nil {
		return nil, err
	}
	d.controller = controller
	d.claims = metrics.NewClaimCounter()
	if d.stopWatch, err = watchClaims(ctx, kube, d.claims); err != nil {
		d.stop()
		return nil, err
	}
	return d, nil
}

// stop ends what startDRA started.
func (d *draRun) stop() {
	if d.stopWatch != nil {
		d.stopWatch()
	}
	if d.controller != nil {
		d.controller.Stop()
	}
}

// claimTemplates lists the ResourceClaimTemplates the jobs' pods will use,
// as the builder makes them.
func claimTemplates(b *workload.Builder, jobs []scenario.Job) []*resourceapi.ResourceClaimTemplate {
	var out []*resourceapi.ResourceClaimTemplate
	for i := range jobs {
		if t := b.ClaimTemplate(&jobs[i]); t != nil {
			out = append(out, t)
		}
	}
	return out
}

// prefillClaims returns, for each pre-fill pod, the claim it holds its GPUs
// through: nil on a device-plugin node.
func prefillClaims(layout *fabric.Layout, pods []fabric.PrefillPod) []*resourceapi.ResourceClaim {
	out := make([]*resourceapi.ResourceClaim, len(pods))
	for i, p := range pods {
		if n := &layout.Nodes[p.Node]; n.DRA {
			if p.Devices != nil {
				out[i] = workload.PrefillClaimOf(Namespace, i, n.Name, p.Devices)
			} else {
				out[i] = workload.PrefillClaim(Namespace, i, n.Name, p.GPUs)
			}
		}
	}
	return out
}

// createAllocated creates claim and then writes its status, which holds
// its allocation: the API server ignores a status sent with a create.
func createAllocated(ctx context.Context, kube kubernetes.Interface, claim *resourceapi.ResourceClaim) error {
	claims := kube.ResourceV1().ResourceClaims(claim.Namespace)
	created, err := claims.Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating ResourceClaim %s: %w", claim.Name, err)
	}
	created.Status = claim.Status
	if _, err := claims.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("allocating ResourceClaim %s: %w", claim.Name, err)
	}
	return nil
}
