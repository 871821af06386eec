package scheduling

import "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

// PodGroupLabel makes a pod a member of the PodGroup it names, in the pod's
// own namespace. It is the label scheduler-plugins, Kubeflow
// training-operator, Trainer v2 and MPI Operator write.
const PodGroupLabel = v1alpha1.PodGroupLabel

// Labels that give a gang member its rank, read in this order. Members are
// placed in rank order so that neighbouring ranks land on neighbouring nodes.
const (
	// RankLabel is gpu-gang's own rank label, for workloads whose operator
	// sets none of the others. Its value is a non-negative integer.
	RankLabel = "gpu-gang.x-k8s.io/rank"
	// KubeflowReplicaTypeLabel is training-operator's replica type
	// (master, launcher, worker...); masters and launchers rank first.
	KubeflowReplicaTypeLabel = "training.kubeflow.org/replica-type"
	// KubeflowReplicaIndexLabel is the index within a replica type.
	KubeflowReplicaIndexLabel = "training.kubeflow.org/replica-index"
	// JobSetJobIndexLabel is JobSet's index of a pod's child Job.
	JobSetJobIndexLabel = "jobset.sigs.k8s.io/job-index"
	// JobCompletionIndexLabel is an indexed Job's completion index.
	JobCompletionIndexLabel = "batch.kubernetes.io/job-completion-index"
)

// Annotations on a PodGroup that set its topology policy. The value is the
// node label key of one of the configured topology levels (for example
// network.topology.nvidia.com/leaf), or kubernetes.io/hostname for one node.
const (
	// AnnotationTopologyRequired makes the level a hard constraint: the gang
	// starts inside one domain of that level, or waits.
	AnnotationTopologyRequired = "gpu-gang.x-k8s.io/topology-required"
	// AnnotationTopologyPreferred starts the search at that level and falls
	// back up the hierarchy when no domain there has room.
	AnnotationTopologyPreferred = "gpu-gang.x-k8s.io/topology-preferred"
)

// AnnotationComputeDomainShareClique, set to "true" on a PodGroup whose
// members join a ComputeDomain, lets the gang's domain share an NVLink
// clique (LabelGPUClique) with other domains. By default gpu-gang keeps
// each domain in a clique no other domain runs in: NVIDIA's driver cannot
// run two domains' IMEX daemons in one clique (k8s-dra-driver-gpu #892,
// CUDA_ERROR_NOT_SUPPORTED). Two domains never share a node either way.
const AnnotationComputeDomainShareClique = "gpu-gang.x-k8s.io/compute-domain-share-clique"

// Kueue's pod-template annotations for the same two policies. gpu-gang reads
// them from the members when the PodGroup sets neither, so manifests written
// for Kueue topology-aware scheduling keep working.
const (
	KueueRequiredTopologyAnnotation  = "kueue.x-k8s.io/podset-required-topology"
	KueuePreferredTopologyAnnotation = "kueue.x-k8s.io/podset-preferred-topology"
)

// Annotations on a PodGroup that cut its members into segments: groups of
// AnnotationSegmentSize consecutive ranks, each inside one domain of the
// segment level, while the gang's own level (AnnotationTopologyRequired or
// -Preferred) holds for the whole. pkg/gang reads and validates them
// (gang.SegmentsOf).
const (
	// AnnotationSegmentSize is K, the members per segment: a positive
	// integer that divides the gang's member count.
	AnnotationSegmentSize = "gpu-gang.x-k8s.io/segment-size"
	// AnnotationSegmentTopologyRequired puts each segment inside one domain
	// of that level, or the gang waits. The value is a level's node label
	// key, as for AnnotationTopologyRequired.
	AnnotationSegmentTopologyRequired = "gpu-gang.x-k8s.io/segment-topology-required"
	// AnnotationSegmentTopologyPreferred starts each segment's search at
	// that level and falls back up the hierarchy.
	AnnotationSegmentTopologyPreferred = "gpu-gang.x-k8s.io/segment-topology-preferred"
)

// Kueue's pod-template annotations for the same segments, which Kueue calls
// podset slices. gpu-gang reads them from the members when the PodGroup
// sets no segment annotation of its own.
const (
	KueueSliceSizeAnnotation             = "kueue.x-k8s.io/podset-slice-size"
	KueueSliceRequiredTopologyAnnotation = "kueue.x-k8s.io/podset-slice-required-topology"
)

// Node labels of the default preset, as GPU feature discovery and Topograph
// write them.
const (
	// LabelGPUClique names a node's multi-node NVLink domain.
	LabelGPUClique = "nvidia.com/gpu.clique"
	// LabelLeaf names the InfiniBand leaf switch a node hangs off.
	LabelLeaf = "network.topology.nvidia.com/leaf"
	// LabelSpine names the spine switch above that leaf.
	LabelSpine = "network.topology.nvidia.com/spine"
)

// AnnotationRailAlignment on a PodGroup says whether the members that take
// part of a node through DRA claims must use the same rails (the same NICs'
// leaf switches, each GPU with the NIC on its PCIe root): RailAlignmentRequired
// waits rather than misaligns, RailAlignmentPreferred (the default) aligns
// when some rail set holds the gang and places it anyway otherwise,
// RailAlignmentNone leaves the devices to kube-scheduler's allocator.
const AnnotationRailAlignment = "gpu-gang.x-k8s.io/rail-alignment"

// The values of AnnotationRailAlignment.
const (
	RailAlignmentRequired  = "required"
	RailAlignmentPreferred = "preferred"
	RailAlignmentNone      = "none"
)

// ReasonRailsNotFree: a gang that requires rail alignment waits because no
// set of rails is free on enough nodes.
const ReasonRailsNotFree = "RailsNotFree"

// AnnotationMovable set to "true" on a PodGroup says that the job restarts
// cheaply (it checkpoints): the scheduler may evict it whole to gather free
// capacity into one domain for a gang that needs it, and prefers it as a
// victim over a job of the same priority that is not movable. "false" or
// no annotation: the job is not moved.
const AnnotationMovable = "gpu-gang.x-k8s.io/movable"
