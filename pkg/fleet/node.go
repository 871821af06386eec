package fleet

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// NodeFacts is what a node's labels, and the devices NVIDIA's GPU DRA
// driver publishes for it, say about its GPUs. ReadNode fills it from
// labels, ReadNodeDevices from both (labels win where present); it holds
// no reference to the labels it was read from, and shares the devices'
// facts read-only.
type NodeFacts struct {
	// GPU is true when GPU feature discovery or the GPU Operator labelled
	// the node (nvidia.com/gpu.present=true, or any GPU label read here),
	// or when it publishes GPU devices.
	GPU bool
	// CUDA is the highest CUDA version the node's driver supports; zero
	// when no label or device says (see cudaSources for the keys, in the
	// order they are read). CUDALabel names the label(s) or the device
	// attribute it came from, for messages.
	CUDA      Version
	CUDALabel string
	// Driver is the NVIDIA driver version; zero when nothing says.
	Driver      Version
	DriverLabel string
	// Compute is the GPUs' compute capability; zero when nothing says.
	Compute      Version
	ComputeLabel string
	// Product is nvidia.com/gpu.product, or where that is unset the
	// devices' productName (several joined by " | "); "" when neither
	// says.
	Product string
	// Capacity is whether the node may be reclaimed. A node none of the
	// configured capacity labels is set on counts as on-demand
	// (CapacityLabel is then ""): provisioners label spot capacity, and
	// nodes they do not manage (on-premises, reserved pools) are not
	// reclaimed.
	Capacity      CapacityType
	CapacityLabel string
	// UpgradeState is nvidia.com/gpu-driver-upgrade-state, "" when unset.
	UpgradeState string
	// Sharing is nvidia.com/gpu.sharing-strategy: "" when unset, one of
	// the scheduling.SharingStrategy* values, or whatever unknown value
	// the label holds (which counts as sharing, see SharedGPUs).
	Sharing string
	// Replicas is nvidia.com/gpu.replicas, 0 when unset or unreadable.
	Replicas int
	// MIGStrategy is nvidia.com/mig.strategy, "" when unset.
	MIGStrategy string
	// MIG is true when the node exposes MIG slices: strategy single or
	// mixed, or per-profile nvidia.com/mig-* labels.
	MIG bool
	// Problems lists the labels that were set but could not be read. Each
	// such label is ignored, as if it were missing.
	Problems []*LabelError
	// Devices is what the node's GPU devices say (ReadNodeDevices); nil
	// when it publishes none, or facts were read from labels alone. Its
	// Problems are the device attributes that could not be read.
	Devices *DeviceFacts
	// fromDevices marks the facts read from Devices rather than labels:
	// a uniform group never mixes the two (see GroupKey).
	fromDevices factSet
}

// HasCUDA reports whether a label gave the node's CUDA version.
func (f *NodeFacts) HasCUDA() bool { return !f.CUDA.IsZero() }

// HasCompute reports whether labels gave the node's compute capability.
func (f *NodeFacts) HasCompute() bool { return !f.Compute.IsZero() }

// Upgrading reports whether the GPU Operator is upgrading the node's
// driver: its upgrade state is set and is not upgrade-done. upgrade-failed
// counts too: the node's driver is in no state to take new work.
func (f *NodeFacts) Upgrading() bool {
	return f.UpgradeState != "" && f.UpgradeState != scheduling.UpgradeStateDone
}

// SharedGPUs reports whether an nvidia.com/gpu on this node is less than a
// whole, exclusive GPU, and says how: under time-slicing or MPS each GPU is
// handed out nvidia.com/gpu.replicas times (unless the device plugin
// renames shares to nvidia.com/gpu.shared, which then advertises no
// nvidia.com/gpu at all); under MIG's single strategy nvidia.com/gpu is a
// MIG slice. A sharing strategy gpu-gang does not know counts as sharing.
func (f *NodeFacts) SharedGPUs() (bool, string) {
	switch f.Sharing {
	case "", scheduling.SharingStrategyNone:
	case scheduling.SharingStrategyTimeSlicing, scheduling.SharingStrategyMPS:
		if f.Replicas > 0 {
			return true, fmt.Sprintf("%s with %d replicas per GPU", f.Sharing, f.Replicas)
		}
		return true, f.Sharing
	default:
		return true, fmt.Sprintf("sharing strategy %q", f.Sharing)
	}
	if f.MIGStrategy == scheduling.MIGStrategySingle {
		return true, "MIG single strategy (nvidia.com/gpu is a MIG slice)"
	}
	return false, ""
}

// versionSource is one way labels spell a version: a label holding it whole,
// or labels holding its components, major first.
type versionSource struct {
	full  string
	parts []string
}

// name is how messages refer to the source, such as
// nvidia.com/cuda.runtime.{major,minor}.
func (s versionSource) name() string {
	if s.full != "" {
		return s.full
	}
	i := strings.LastIndexByte(s.parts[0], '.')
	suffixes := make([]string, len(s.parts))
	for k, p := range s.parts {
		suffixes[k] = p[i+1:]
	}
	return s.parts[0][:i+1] + "{" + strings.Join(suffixes, ",") + "}"
}

// The sources of each version, in the order they are read: the current GPU
// feature discovery keys, then the deprecated ones, which older releases
// write alone. The first source that is set and readable wins. The CUDA
// version is never derived from the driver version: GFD writes both from
// the same NVML query, so a node that has one has the other, and a table
// from driver to CUDA would need forward-compatibility choices (and go
// stale) for no gain.
var (
	cudaSources = []versionSource{
		{full: scheduling.LabelCUDARuntimeVersionFull},
		{parts: []string{scheduling.LabelCUDARuntimeVersionMajor, scheduling.LabelCUDARuntimeVersionMinor}},
		{parts: []string{scheduling.LabelCUDARuntimeMajor, scheduling.LabelCUDARuntimeMinor}},
	}
	driverSources = []versionSource{
		{full: scheduling.LabelCUDADriverVersionFull},
		{parts: []string{scheduling.LabelCUDADriverVersionMajor, scheduling.LabelCUDADriverVersionMinor, scheduling.LabelCUDADriverVersionRevision}},
		{parts: []string{scheduling.LabelCUDADriverMajor, scheduling.LabelCUDADriverMinor, scheduling.LabelCUDADriverRev}},
	}
	computeSources = []versionSource{
		{parts: []string{scheduling.LabelGPUComputeMajor, scheduling.LabelGPUComputeMinor}},
	}
)

// CUDALabels names the labels a CUDA version is read from, for messages.
func CUDALabels() string { return sourceNames(cudaSources) }

// ComputeLabels names the labels a compute capability is read from.
func ComputeLabels() string { return sourceNames(computeSources) }

func sourceNames(sources []versionSource) string {
	names := make([]string, len(sources))
	for i, s := range sources {
		names[i] = s.name()
	}
	return strings.Join(names, ", ")
}

// ReadNode reads a node's GPU facts from its labels. It never fails: a label
// it cannot read is reported in Problems and otherwise ignored. A label
// whose value is empty counts as missing.
func ReadNode(labels map[string]string, opts *Options) NodeFacts {
	var f NodeFacts
	f.CUDA, f.CUDALabel = readVersion(labels, cudaSources, "a CUDA version such as \"12.4\"", &f.Problems)
	f.Driver, f.DriverLabel = readVersion(labels, driverSources, "a driver version such as \"550.54.15\"", &f.Problems)
	f.Compute, f.ComputeLabel = readVersion(labels, computeSources, "a compute capability such as \"9.0\"", &f.Problems)
	f.Product = labels[scheduling.LabelGPUProduct]
	f.UpgradeState = labels[scheduling.LabelGPUDriverUpgradeState]
	f.Capacity, f.CapacityLabel = readCapacity(labels, opts.capacityLabels(), &f.Problems)

	f.Sharing = labels[scheduling.LabelGPUSharingStrategy]
	switch f.Sharing {
	case "", scheduling.SharingStrategyNone, scheduling.SharingStrategyTimeSlicing, scheduling.SharingStrategyMPS:
	default:
		f.Problems = append(f.Problems, &LabelError{Label: scheduling.LabelGPUSharingStrategy, Value: f.Sharing,
			Reason: "is not a sharing strategy gpu-gang knows, so the node is taken to share its GPUs",
			Want:   quoteList(scheduling.SharingStrategyNone, scheduling.SharingStrategyTimeSlicing, scheduling.SharingStrategyMPS)})
	}
	if v := labels[scheduling.LabelGPUReplicas]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			f.Problems = append(f.Problems, &LabelError{Label: scheduling.LabelGPUReplicas, Value: v,
				Reason: "is not a positive whole number", Want: "the number of pods sharing each GPU, such as \"4\""})
		} else {
			f.Replicas = n
		}
	}

	f.MIGStrategy = labels[scheduling.LabelMIGStrategy]
	switch f.MIGStrategy {
	case "", scheduling.MIGStrategyNone:
	case scheduling.MIGStrategySingle, scheduling.MIGStrategyMixed:
		f.MIG = true
	default:
		f.Problems = append(f.Problems, &LabelError{Label: scheduling.LabelMIGStrategy, Value: f.MIGStrategy,
			Reason: "is not a MIG strategy",
			Want:   quoteList(scheduling.MIGStrategyNone, scheduling.MIGStrategySingle, scheduling.MIGStrategyMixed)})
	}
	gfd := labels[scheduling.LabelGPUPresent] == "true" || f.Product != "" || f.Sharing != "" || f.MIGStrategy != ""
	for k := range labels {
		// Under the mixed strategy GFD labels each profile (nvidia.com/mig-1g.10gb.count...).
		// The loop only ORs booleans, so map order cannot change the outcome.
		if strings.HasPrefix(k, scheduling.ResourceMIGPrefix) {
			f.MIG = true
			gfd = true
		}
	}
	f.GPU = gfd || !f.CUDA.IsZero() || !f.Driver.IsZero() || !f.Compute.IsZero()
	return f
}

// readVersion returns the version of the first source that is set and
// readable, and the source's name. Sources set but unreadable add a problem.
func readVersion(labels map[string]string, sources []versionSource, want string, problems *[]*LabelError) (Version, string) {
	for _, s := range sources {
		if s.full != "" {
			raw := labels[s.full]
			if raw == "" {
				continue
			}
			v, err := ParseVersion(raw)
			if err != nil {
				*problems = append(*problems, &LabelError{Label: s.full, Value: raw, Reason: err.Error(), Want: want})
				continue
			}
			return v, s.name()
		}
		if labels[s.parts[0]] == "" {
			if k, v := firstSet(labels, s.parts[1:]); k != "" {
				*problems = append(*problems, &LabelError{Label: k, Value: v,
					Reason: fmt.Sprintf("is set but %s is not", s.parts[0]), Want: "both labels, or neither"})
			}
			continue
		}
		// Components are read up to the first one that is missing: a
		// version without its minor counts as major.0, which can only
		// understate the node.
		comps := make([]string, 0, len(s.parts))
		ok := true
		for _, key := range s.parts {
			raw := labels[key]
			if raw == "" {
				break
			}
			if _, err := ParseVersion(raw); err != nil || strings.Contains(raw, ".") {
				*problems = append(*problems, &LabelError{Label: key, Value: raw,
					Reason: "is not a whole number", Want: "a whole number such as \"12\""})
				ok = false
				break
			}
			comps = append(comps, raw)
		}
		if !ok {
			continue
		}
		v, err := ParseVersion(strings.Join(comps, "."))
		if err != nil { // components were checked one by one; never expected
			*problems = append(*problems, &LabelError{Label: s.parts[0], Value: labels[s.parts[0]], Reason: err.Error(), Want: want})
			continue
		}
		return v, s.name()
	}
	return Version{}, ""
}

func firstSet(labels map[string]string, keys []string) (string, string) {
	for _, k := range keys {
		if v := labels[k]; v != "" {
			return k, v
		}
	}
	return "", ""
}

func quoteList(values ...string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	switch len(q) {
	case 1:
		return q[0]
	case 2:
		return q[0] + " or " + q[1]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
