package scheduling

// GPU fleet vocabulary: what a gang asks of the GPUs it runs on, and the node
// labels that say what a node's GPUs are. pkg/fleet owns the rules that read
// them; everything else learns the names here.

// Annotations on a PodGroup, or on a pod, that constrain which GPU nodes a
// gang's GPU members may use. A pod's annotation wins over its PodGroup's.
const (
	// AnnotationMinCUDA is the lowest CUDA version the image needs, such as
	// "12.4". Members go only to nodes whose driver supports at least that
	// version (see LabelCUDARuntimeVersionFull).
	AnnotationMinCUDA = "gpu-gang.x-k8s.io/min-cuda"
	// AnnotationMinComputeCapability is the lowest compute capability the
	// image's kernels were built for, such as "9.0" for Hopper.
	AnnotationMinComputeCapability = "gpu-gang.x-k8s.io/min-compute-capability"
	// AnnotationUniform lists, comma-separated, the node label keys whose
	// values all GPU members of one gang must share, or is "none". Unset, it
	// means LabelGPUProduct and UniformKeyDriverMajorMinor.
	AnnotationUniform = "gpu-gang.x-k8s.io/uniform"
	// AnnotationCapacityType is one of the CapacityType* policies below.
	AnnotationCapacityType = "gpu-gang.x-k8s.io/capacity-type"
	// AnnotationAllowSharedGPUs set to "true" lets members that ask for
	// whole GPUs (nvidia.com/gpu) go to nodes that share each GPU between
	// pods (time-slicing, MPS) or expose MIG slices as nvidia.com/gpu.
	AnnotationAllowSharedGPUs = "gpu-gang.x-k8s.io/allow-shared-gpus"
)

// Values of AnnotationUniform and AnnotationCapacityType.
const (
	// UniformNone turns uniform grouping off.
	UniformNone = "none"
	// UniformKeyDriverMajorMinor is not a node label: listed in
	// AnnotationUniform, it stands for the major.minor of the node's driver
	// version, read from the current or the deprecated GPU feature
	// discovery driver labels. A revision bump (550.54.14 to 550.54.15)
	// does not split a gang's nodes; a minor one (550.54 to 550.90) does.
	UniformKeyDriverMajorMinor = "gpu-gang.x-k8s.io/driver-major-minor"

	// CapacityTypeOnDemand keeps every GPU member off spot capacity.
	CapacityTypeOnDemand = "on-demand"
	// CapacityTypeSpot puts every GPU member on spot capacity.
	CapacityTypeSpot = "spot"
	// CapacityTypeUniform (the default) puts all GPU members of a gang on
	// one capacity type, either one: a single spot reclaim then never
	// strands a half that keeps being paid for.
	CapacityTypeUniform = "uniform"
	// CapacityTypeAny places members regardless of capacity type.
	CapacityTypeAny = "any"
)

// Node labels GPU feature discovery (GFD) writes. GFD is part of NVIDIA's
// k8s-device-plugin project and is deployed by the GPU Operator. Its label
// table (docs/gpu-feature-discovery/README.md in that project) marks the
// cuda.driver.* and cuda.runtime.* keys as deprecated in favour of the
// cuda.driver-version.* and cuda.runtime-version.* keys; current releases
// still write both, older ones only the deprecated set.
const (
	// LabelCUDARuntimeVersionFull is, despite the name, the highest CUDA
	// version the node's driver supports (what nvidia-smi prints as "CUDA
	// Version"), such as "12.4". .major and .minor split it.
	LabelCUDARuntimeVersionFull  = "nvidia.com/cuda.runtime-version.full"
	LabelCUDARuntimeVersionMajor = "nvidia.com/cuda.runtime-version.major"
	LabelCUDARuntimeVersionMinor = "nvidia.com/cuda.runtime-version.minor"
	// LabelCUDARuntimeMajor and LabelCUDARuntimeMinor are the deprecated
	// spelling of the same CUDA version.
	LabelCUDARuntimeMajor = "nvidia.com/cuda.runtime.major"
	LabelCUDARuntimeMinor = "nvidia.com/cuda.runtime.minor"

	// LabelCUDADriverVersionFull is the NVIDIA driver version, such as
	// "550.107.02"; .major, .minor and .revision split it.
	LabelCUDADriverVersionFull     = "nvidia.com/cuda.driver-version.full"
	LabelCUDADriverVersionMajor    = "nvidia.com/cuda.driver-version.major"
	LabelCUDADriverVersionMinor    = "nvidia.com/cuda.driver-version.minor"
	LabelCUDADriverVersionRevision = "nvidia.com/cuda.driver-version.revision"
	// LabelCUDADriverMajor, LabelCUDADriverMinor and LabelCUDADriverRev are
	// the deprecated spelling of the driver version (note .rev, not
	// .revision).
	LabelCUDADriverMajor = "nvidia.com/cuda.driver.major"
	LabelCUDADriverMinor = "nvidia.com/cuda.driver.minor"
	LabelCUDADriverRev   = "nvidia.com/cuda.driver.rev"

	// LabelGPUComputeMajor and LabelGPUComputeMinor are the GPUs' compute
	// capability, 9 and 0 for Hopper.
	LabelGPUComputeMajor = "nvidia.com/gpu.compute.major"
	LabelGPUComputeMinor = "nvidia.com/gpu.compute.minor"
	// LabelGPUProduct is the GPU model with spaces turned into dashes, such
	// as "NVIDIA-H100-80GB-HBM3". The device plugin appends "-SHARED" on
	// nodes that share GPUs, and MIG's single strategy appends the slice
	// profile ("-MIG-1g.10gb"), so such nodes never look uniform with
	// nodes that hand out whole GPUs.
	LabelGPUProduct = "nvidia.com/gpu.product"
	// LabelGPUPresent is "true" on nodes the GPU Operator found GPUs on.
	LabelGPUPresent = "nvidia.com/gpu.present"
	// LabelGPUSharingStrategy is "none", "time-slicing" or "mps", as the
	// device plugin configures the node.
	LabelGPUSharingStrategy = "nvidia.com/gpu.sharing-strategy"
	// LabelGPUReplicas is how many pods share each GPU under a sharing
	// strategy; nvidia.com/gpu capacity is the GPU count times this.
	LabelGPUReplicas = "nvidia.com/gpu.replicas"
	// LabelMIGStrategy is "none", "single" or "mixed". Under "single",
	// nvidia.com/gpu counts MIG slices, not whole GPUs; under "mixed",
	// each slice profile is a resource of its own (ResourceMIGPrefix).
	LabelMIGStrategy = "nvidia.com/mig.strategy"
)

// Values of LabelGPUSharingStrategy and LabelMIGStrategy.
const (
	SharingStrategyNone        = "none"
	SharingStrategyTimeSlicing = "time-slicing"
	SharingStrategyMPS         = "mps"

	MIGStrategyNone   = "none"
	MIGStrategySingle = "single"
	MIGStrategyMixed  = "mixed"
)

// LabelGPUDriverUpgradeState is the GPU Operator's driver upgrade controller
// state for the node. The controller (its "GPU Driver Upgrades" guide, and
// the state names in NVIDIA's k8s-operator-libs upgrade package) moves a
// node through states such as upgrade-required, cordon-required,
// wait-for-jobs-required, pod-deletion-required, drain-required,
// pod-restart-required, validation-required and uncordon-required, ending
// at UpgradeStateDone, or upgrade-failed. The node is cordoned only some way
// into that sequence, so the scheduler must not rely on the cordon. Only
// UpgradeStateDone, or no label, means the node's driver is settled.
const (
	LabelGPUDriverUpgradeState = "nvidia.com/gpu-driver-upgrade-state"
	UpgradeStateDone           = "upgrade-done"
)

// Node labels that say whether a node is spot (reclaimable) capacity, as
// common provisioners write them. Sources: Karpenter's well-known labels
// (reserved arrived with its capacity reservation support), GKE's Spot VM
// guide (nodeSelector cloud.google.com/gke-spot: "true"), the EKS managed
// node group CapacityType enum (ON_DEMAND, SPOT, CAPACITY_BLOCK). The
// lifecycle label is a community convention with no single owner; its
// values vary by installer, hence the lenient reading in pkg/fleet.
const (
	// LabelKarpenterCapacityType is Karpenter's: "spot", "on-demand", or
	// "reserved" for capacity reservations.
	LabelKarpenterCapacityType = "karpenter.sh/capacity-type"
	// LabelGKESpot is "true" on GKE Spot VM nodes; other nodes lack it.
	LabelGKESpot = "cloud.google.com/gke-spot"
	// LabelEKSCapacityType is EKS managed node groups': "ON_DEMAND",
	// "SPOT" or "CAPACITY_BLOCK".
	LabelEKSCapacityType = "eks.amazonaws.com/capacityType"
	// LabelNodeLifecycle is a convention several installers and cluster
	// autoscaler set-ups use: "spot" or "normal"/"on-demand".
	LabelNodeLifecycle = "node.kubernetes.io/lifecycle"
)

// DefaultCapacityTypeLabels returns the capacity-type label keys read when
// the plugin args name none, in the order they are tried. Each call returns
// a fresh slice.
func DefaultCapacityTypeLabels() []string {
	return []string{LabelKarpenterCapacityType, LabelGKESpot, LabelEKSCapacityType, LabelNodeLifecycle}
}

// Extended resources that carry NVIDIA GPUs. The device plugin's README
// describes sharing: under time-slicing or MPS each GPU is advertised
// replicas times, as nvidia.com/gpu, or as <resource>.shared when
// renameByDefault is set; MIG's mixed strategy advertises one resource per
// slice profile.
const (
	// ResourceGPU is a whole GPU, unless the node shares GPUs (see
	// LabelGPUSharingStrategy) or runs MIG's single strategy.
	ResourceGPU = "nvidia.com/gpu"
	// ResourceGPUShared is a share of a GPU under time-slicing or MPS when
	// the device plugin renames shared resources (renameByDefault). Any
	// resource name ending in ResourceSharedSuffix is such a share.
	ResourceGPUShared    = "nvidia.com/gpu.shared"
	ResourceSharedSuffix = ".shared"
	// ResourceMIGPrefix starts the name of every MIG slice profile under
	// the mixed strategy, such as nvidia.com/mig-1g.10gb.
	ResourceMIGPrefix = "nvidia.com/mig-"
)
