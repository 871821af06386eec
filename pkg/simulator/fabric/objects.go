package fabric

import (
	"context"
	"fmt"
	"math/rand/v2"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/internal/parallel"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// GPU is the extended resource simulated nodes offer: the only
// accelerator (fleet.IsAccelerator) the simulator simulates.
const GPU v1.ResourceName = "nvidia.com/gpu"

// GPUsOf is how many GPUs a pod takes from its node, as the scheduler
// counts them (resourcehelper.PodRequests): its containers' requests added
// up, or its largest init container's if more, or its pod-level request.
func GPUsOf(pod *v1.Pod) int {
	q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[GPU]
	return int(q.Value())
}

// KwokNodeAnnotation marks the nodes kwok manages (with value
// KwokNodeValue); kwok runs the lifecycle of pods bound to them.
const (
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	KwokNodeValue      = "fake"
)

// Node builds the node object for n, with its status already set: capacity,
// allocatable and Ready. kube-apiserver keeps a new node's status, as it
// does when a kubelet registers, so no status update is needed. A DRA node
// advertises no nvidia.com/gpu: its GPUs are its ResourceSlice's devices.
func (l *Layout) Node(n *NodeInfo) *v1.Node {
	capacity := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("256"),
		v1.ResourceMemory: resource.MustParse("2Ti"),
		v1.ResourcePods:   resource.MustParse("256"),
	}
	if gpus := n.advertisedGPUs(); gpus > 0 {
		capacity[GPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	labels := make(map[string]string, len(n.Labels))
	for k, v := range n.Labels {
		labels[k] = v
	}
	now := metav1.Now()
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.Name,
			Labels:      labels,
			Annotations: map[string]string{KwokNodeAnnotation: KwokNodeValue},
		},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Phase:       v1.NodeRunning,
			Conditions: []v1.NodeCondition{{
				Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
				Message: "simulated by gpu-gang", LastHeartbeatTime: now, LastTransitionTime: now,
			}},
		},
	}
}

// CreateNodes creates every node of the layout, workers at a time, and
// makes sure each one is Ready with its capacity.
func (l *Layout) CreateNodes(ctx context.Context, client kubernetes.Interface, workers int) error {
	return parallel.Do(ctx, len(l.Nodes), workers, func(ctx context.Context, i int) error {
		node := l.Node(&l.Nodes[i])
		created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
		if created.Status.Allocatable.Name(GPU, resource.DecimalSI).Value() == int64(l.Nodes[i].advertisedGPUs()) && len(created.Status.Conditions) > 0 {
			return nil
		}
		created.Status = node.Status
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("setting the status of node %s: %w", node.Name, err)
		}
		return nil
	})
}

// advertisedGPUs is the node's allocatable nvidia.com/gpu: none on a DRA
// node.
func (n *NodeInfo) advertisedGPUs() int {
	if n.DRA {
		return 0
	}
	return n.GPUs
}

// PrefillPod is a pod that occupies GPUs before the workload starts.
type PrefillPod struct {
	// Node is the index of the node in Layout.Nodes.
	Node int
	// GPUs is how many of its GPUs the pod takes.
	GPUs int
	// Devices are the minors of the GPUs it takes on a DRA node of a
	// rail-optimized fabric, drawn at random (see Layout.Prefill); nil
	// elsewhere, where a DRA node's pre-fill takes its first GPUs.
	Devices []int
}

// Prefill draws the pre-fill pods of the layout, at most one per node. On a
// DRA node of a rail-optimized fabric it also draws which GPUs each pod
// holds, so that nodes stay in use on differing rails.
func (l *Layout) Prefill(seed int64) []PrefillPod {
	p := l.Spec.Prefill
	if p == nil || p.Fraction <= 0 {
		return nil
	}
	total := l.TotalGPUs()
	target := int(p.Fraction * float64(total))
	rng := rand.New(rand.NewPCG(uint64(seed), 3))
	used := make([]int, len(l.Nodes))
	switch p.Layout {
	case scenario.PrefillPacked:
		order := rng.Perm(len(l.Nodes))
		for _, n := range order {
			take := min(l.Nodes[n].GPUs, target)
			used[n] = take
			target -= take
			if target == 0 {
				break
			}
		}
	default:
		// GPU slots are numbered node by node, so slot s belongs to
		// owner[s]; nodes that share GPUs own more slots.
		owner := make([]int, 0, total)
		for n := range l.Nodes {
			for range l.Nodes[n].GPUs {
				owner = append(owner, n)
			}
		}
		slots := rng.Perm(total)
		for _, s := range slots[:target] {
			used[owner[s]]++
		}
	}
	var pods []PrefillPod
	for n, g := range used {
		if g > 0 {
			pods = append(pods, PrefillPod{Node: n, GPUs: g})
		}
	}
	l.prefillDevices(pods)
	return pods
}
