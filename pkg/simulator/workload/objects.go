// Package workload turns scenario jobs into Kubernetes objects for each
// scheduler profile and submits them at their arrival times.
//
// One job maps to objects as follows:
//
//   - GangPlugin (profile gpu-gang): a scheduling.x-k8s.io/v1alpha1 PodGroup
//     with minMember = pods and, for a job with a topology level, the
//     annotation gpu-gang.x-k8s.io/topology-required or -preferred set to
//     the level's label key, and the job's GPU fleet policy as the
//     gpu-gang.x-k8s.io/min-cuda, min-compute-capability, uniform,
//     capacity-type and allow-shared-gpus annotations; pods labelled
//     scheduling.x-k8s.io/pod-group=<job> for schedulerName gpu-gang.
//   - Plain (profile default): the same pods with no group, for
//     default-scheduler; a gang is just pods arriving together.
//   - Native (profile in-tree): a scheduling.k8s.io/v1beta1 PodGroup with
//     spec.schedulingPolicy.gang.minCount = pods, spec.disruptionMode.all
//     (preemption evicts the gang whole or not at all), the job's
//     priorityClassName and, for a job with a required topology level,
//     spec.schedulingConstraints.topology = [{key: <the level's label
//     key>}]; pods name it in spec.schedulingGroup.podGroupName. The
//     in-tree constraint is always hard, so a preferred level maps to no
//     constraint at all, unless the builder's PreferredAsKey is set (profile
//     in-tree-topology): then it maps to the same key, as a careful in-tree
//     user would write it.
//
// A job with segments (scenario.Segments) is hierarchical. Its members get
// SegmentLabel in every flavor. GangPlugin's PodGroup then needs whole
// segments (minMember = Job.Quorum) and states them with the
// gpu-gang.x-k8s.io/segment-size and segment-topology-required
// annotations, or Kueue's podset-slice-size and
// podset-slice-required-topology pod annotations; Native makes a
// CompositePodGroup (scheduling.k8s.io/v1alpha3) with one child PodGroup
// per segment instead of the single PodGroup (see Builder.composite); Plain
// has no form for it.
//
// A job's GPU fleet policy reaches gpu-gang as annotations on its PodGroup,
// of either API. The baselines
// see none of it, except that a Builder with NodeAffinity (profile
// default-affinity) gives each member of a GPU gang the required node
// affinity a careful user would write for the policy's node-by-node rules
// (fleet.Fleet.NodeAffinity); one product, driver or capacity type per gang
// has no such form.
//
// Plain single pods of the workload are the same pods without any group in
// every profile.
//
// A job's pods ask for nvidia.com/gpu in their container, which the device
// plugin serves on nodes that advertise it and DRA serves through the
// DeviceClass's extendedResourceName on nodes that do not; or, for a job
// whose GPUs come through claims (gpuRequest: claim), every flavor also
// gets a ResourceClaimTemplate named after the job for exactly the pod's
// GPUs of DeviceClass gpu.nvidia.com: each pod lists it in
// spec.resourceClaims as claim "gpus", its container refers to that claim
// and asks for no nvidia.com/gpu, and the resourceclaim controller
// (lifecycle.StartClaimController) creates each pod's claim from it. A job
// that claims NICs too (gpuRequest: claim-with-nics) gets the same, its
// template asking for pairs of one GPU and one RDMA NIC under one PCIe
// root. A gang's rail alignment reaches gpu-gang as the
// gpu-gang.x-k8s.io/rail-alignment annotation on its PodGroup, of either
// API, and a movable gang (scenario.GangClass.Movable) carries
// MovableAnnotation there.
package workload

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/lifecycle"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
)

// Flavor is how a profile expresses gangs.
type Flavor int

// Flavors.
const (
	// GangPlugin uses gpu-gang's PodGroup CRD and label.
	GangPlugin Flavor = iota
	// Plain uses no group at all.
	Plain
	// Native uses the in-tree scheduling.k8s.io/v1beta1 PodGroup.
	Native
)

// Labels and annotations the simulator puts on its pods.
const (
	// JobLabel names the job a pod belongs to, in every flavor; metrics
	// group pods into gangs by it.
	JobLabel = "simulator.gpu-gang.x-k8s.io/job"
	// RoleLabel is "workload" for submitted pods and "prefill" for pods
	// that occupy the fabric before the run.
	RoleLabel = "simulator.gpu-gang.x-k8s.io/role"
	// RoleWorkload and RolePrefill are RoleLabel's values.
	RoleWorkload = "workload"
	RolePrefill  = "prefill"
)

// MovableAnnotation, set to "true" on a gang's PodGroup (of either API),
// tells gpu-gang that it may move the gang, evicting it to start again
// elsewhere, to consolidate free NVLink cliques and leaves. Only gpu-gang
// will read it; the baselines have no such notion.
const MovableAnnotation = "gpu-gang.x-k8s.io/movable"

// Builder makes the objects of jobs for one profile.
type Builder struct {
	// Namespace holds every object.
	Namespace string
	// Flavor is how gangs are expressed.
	Flavor Flavor
	// SchedulerName is the pods' spec.schedulerName.
	SchedulerName string
	// TierKeys maps scenario tiers (clique, leaf, spine) to label keys.
	TierKeys map[string]string
	// PreferredAsKey gives a Native gang with a preferred level that
	// level as its topology key too, hard as every in-tree constraint is.
	PreferredAsKey bool
	// NodeAffinity, when set, returns the required node affinity of a GPU
	// gang's members, nil for none.
	NodeAffinity func(job *scenario.Job) (*v1.NodeSelector, error)
}

// Objects are one job's objects, to create in order: the claim template
// (if any), the group or the composite and its children (if any), then the
// pods.
type Objects struct {
	// ClaimTemplate is set for jobs whose pods claim their GPUs.
	ClaimTemplate *resourceapi.ResourceClaimTemplate
	// GangGroup is set for GangPlugin gangs.
	GangGroup *v1alpha1.PodGroup
	// NativeGroup is set for Native gangs without segments.
	NativeGroup *schedulingv1beta1.PodGroup
	// Composite and SegmentGroups are set instead for Native gangs with
	// segments: the root and one child PodGroup per segment, in order.
	Composite     *schedulingv1alpha3.CompositePodGroup
	SegmentGroups []*schedulingv1beta1.PodGroup
	// Pods are the members, in rank order.
	Pods []*v1.Pod
}

// PodName is the name of job's i-th pod: the job's own for a plain pod,
// <job>-<i> for a gang's member.
func PodName(job *scenario.Job, i int) string {
	if !job.Gang {
		return job.Name
	}
	return fmt.Sprintf("%s-%d", job.Name, i)
}

// Build makes the objects for job.
func (b *Builder) Build(job *scenario.Job) (*Objects, error) {
	out := &Objects{Pods: make([]*v1.Pod, job.Pods), ClaimTemplate: b.ClaimTemplate(job)}
	for i := range out.Pods {
		out.Pods[i] = b.pod(PodName(job, i), job)
		if job.Gang {
			// Every profile gets the index a training operator puts on
			// its replicas: members rank by it, not by name (where
			// job-10 sorts before job-2).
			out.Pods[i].Labels[scheduling.KubeflowReplicaIndexLabel] = strconv.Itoa(i)
		}
		if out.ClaimTemplate != nil {
			useClaimTemplate(out.Pods[i], out.ClaimTemplate.Name)
		}
	}
	if !job.Gang {
		return out, nil
	}
	if b.NodeAffinity != nil && job.GPUsPerPod > 0 {
		required, err := b.NodeAffinity(job)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", job.Name, err)
		}
		if required != nil {
			for _, p := range out.Pods {
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: required}}
			}
		}
	}
	if job.Segments != nil {
		labelSegments(job, out)
	}
	switch b.Flavor {
	case GangPlugin:
		out.GangGroup = &v1alpha1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: b.Namespace, Labels: map[string]string{JobLabel: job.Name}},
			Spec:       v1alpha1.PodGroupSpec{MinMember: int32(job.Pods)},
		}
		if t := job.Topology; t != nil {
			key, err := b.tierKey(job, t)
			if err != nil {
				return nil, err
			}
			annotation := scheduling.AnnotationTopologyPreferred
			if t.Required {
				annotation = scheduling.AnnotationTopologyRequired
			}
			out.GangGroup.Annotations = map[string]string{annotation: key}
		}
		for k, v := range gangAnnotations(job) {
			if out.GangGroup.Annotations == nil {
				out.GangGroup.Annotations = map[string]string{}
			}
			out.GangGroup.Annotations[k] = v
		}
		for _, p := range out.Pods {
			p.Labels[v1alpha1.PodGroupLabel] = job.Name
		}
		if job.Segments != nil {
			if err := b.gangPluginSegments(job, out); err != nil {
				return nil, err
			}
		}
	case Native:
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: job.Name, Namespace: b.Namespace, Labels: map[string]string{JobLabel: job.Name}},
			Spec: schedulingv1beta1.PodGroupSpec{
				SchedulingPolicy:  schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(job.Pods)}},
				PriorityClassName: PriorityClassName(job.Priority),
				// Every member is needed, so a victim gang goes whole or
				// not at all: the in-tree workload-aware preemption's
				// counterpart of gpu-gang's.
				DisruptionMode: &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}},
			},
		}
		if t := job.Topology; t != nil && (t.Required || b.PreferredAsKey) {
			key, err := b.tierKey(job, t)
			if err != nil {
				return nil, err
			}
			pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
				Topology: []schedulingv1beta1.TopologyConstraint{{Key: key}},
			}
		}
		// The fleet policy and rail alignment have no field in the native
		// API; gpu-gang reads them from the PodGroup's annotations
		// whichever API carries them, and the in-tree scheduler ignores
		// them.
		if a := gangAnnotations(job); len(a) > 0 {
			pg.Annotations = a
		}
		out.NativeGroup = pg
		for _, p := range out.Pods {
			p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(job.Name)}
		}
		if job.Segments != nil {
			if err := b.composite(job, out); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// gangAnnotations are the annotations gpu-gang reads on a gang's PodGroup
// besides its topology: the GPU fleet policy, the rail alignment and
// whether it may be moved; nil when the job sets none of them.
func gangAnnotations(job *scenario.Job) map[string]string {
	a := job.GPU.Annotations()
	set := func(k, v string) {
		if a == nil {
			a = map[string]string{}
		}
		a[k] = v
	}
	if job.RailAlignment != "" {
		set(scheduling.AnnotationRailAlignment, job.RailAlignment)
	}
	if job.Movable {
		set(MovableAnnotation, "true")
	}
	return a
}

func (b *Builder) tierKey(job *scenario.Job, t *scenario.Topology) (string, error) {
	key := b.TierKeys[t.Level]
	if key == "" {
		return "", fmt.Errorf("job %s: the fabric's preset has no label for tier %q", job.Name, t.Level)
	}
	return key, nil
}

func (b *Builder) pod(name string, job *scenario.Job) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: b.Namespace,
			Labels:    map[string]string{JobLabel: job.Name, RoleLabel: RoleWorkload},
		},
		Spec: v1.PodSpec{
			SchedulerName:                 b.SchedulerName,
			PriorityClassName:             PriorityClassName(job.Priority),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []v1.Container{container(job.GPUsPerPod)},
		},
	}
	if job.Duration > 0 {
		p.Annotations = map[string]string{lifecycle.RunForAnnotation: job.Duration.String()}
	}
	return p
}

// PrefillPod builds a pod bound straight to node that takes gpus GPUs until
// the end of the run. It bypasses every scheduler. On a DRA node (dra) it
// holds its GPUs through the claim PrefillClaim builds for the same index;
// elsewhere it asks for nvidia.com/gpu.
func PrefillPod(namespace string, index int, node string, gpus int, dra bool) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      prefillName(index),
			Namespace: namespace,
			Labels:    map[string]string{RoleLabel: RolePrefill},
		},
		Spec: v1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []v1.Container{container(gpus)},
		},
	}
	if dra {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: GPUClaim, ResourceClaimName: ptr.To(prefillName(index))}}
		claimInContainer(p)
	}
	return p
}

func container(gpus int) v1.Container {
	requests := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("1"),
		v1.ResourceMemory: resource.MustParse("1Gi"),
	}
	limits := v1.ResourceList{}
	if gpus > 0 {
		q := *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		requests[gpuResource] = q
		limits[gpuResource] = q
	}
	return v1.Container{Name: "train", Image: "registry.invalid/gpu-gang/train:sim", Resources: v1.ResourceRequirements{Requests: requests, Limits: limits}}
}

// gpuResource is what a container asks for GPUs with.
const gpuResource = fabric.GPU

// PriorityClassName is the PriorityClass the simulator creates for a
// priority value; "" for 0, which needs none.
func PriorityClassName(priority int32) string {
	if priority == 0 {
		return ""
	}
	return fmt.Sprintf("sim-priority-%d", priority)
}

// PriorityClasses returns the PriorityClasses jobs need, one per distinct
// non-zero priority, in first-use order.
func PriorityClasses(jobs []scenario.Job) []*schedulingv1.PriorityClass {
	seen := map[int32]bool{}
	var out []*schedulingv1.PriorityClass
	for _, j := range jobs {
		if j.Priority == 0 || seen[j.Priority] {
			continue
		}
		seen[j.Priority] = true
		out = append(out, &schedulingv1.PriorityClass{
			ObjectMeta:  metav1.ObjectMeta{Name: PriorityClassName(j.Priority)},
			Value:       j.Priority,
			Description: "simulated job priority",
		})
	}
	return out
}
