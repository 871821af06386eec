package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Scenario is one simulator input: a fabric and a workload.
type Scenario struct {
	// Name identifies the scenario in reports and benchmark names.
	Name string `json:"name"`
	// Description says what the scenario shows, for the report.
	Description string `json:"description,omitempty"`
	// Seed makes the random parts (arrivals, sizes, pre-fill) repeatable.
	Seed int64 `json:"seed,omitempty"`
	// Timeout bounds one profile's run after the first submission; gangs
	// still unbound then are reported as such. Default 10m.
	Timeout Duration `json:"timeout,omitempty"`
	// Fabric is the simulated cluster.
	Fabric Fabric `json:"fabric"`
	// Workload is what is submitted to it.
	Workload Workload `json:"workload"`
	// SchedulerProcess runs every profile's scheduler in a process of its
	// own, as gpu-gang-native's always runs, so that the report can give
	// each scheduler's peak memory (its VmHWM). The scheduler's holds,
	// read from an in-process scheduler, are then not read, for any
	// profile.
	SchedulerProcess bool `json:"schedulerProcess,omitempty"`
	// Preload creates the whole workload before the scheduler starts, and
	// starts the run's clock (every job's submission) when the scheduler
	// does: every pod is pending from the first moment, so the run measures
	// the scheduler rather than how fast the simulator creates objects on a
	// machine it shares with the API server. Every arrival must then be a
	// burst at 0 s.
	Preload bool `json:"preload,omitempty"`
	// Profiles are the profiles the simulator runs when its command line
	// names none (--profiles); empty for every profile. A scenario whose
	// every run is costly names the ones its question needs.
	Profiles []string `json:"profiles,omitempty"`
}

// Fabric describes a three-tier GPU fabric: spines hold leaves, leaves hold
// nodes, and consecutive nodes of a leaf form NVLink cliques.
type Fabric struct {
	// Spines is the number of spine switches.
	Spines int `json:"spines"`
	// LeavesPerSpine is the number of leaf switches under each spine.
	LeavesPerSpine int `json:"leavesPerSpine"`
	// NodesPerLeaf is the number of nodes under each leaf.
	NodesPerLeaf int `json:"nodesPerLeaf"`
	// GPUsPerNode is every node's nvidia.com/gpu capacity.
	GPUsPerNode int `json:"gpusPerNode"`
	// CliqueSize is how many consecutive nodes of a leaf share an NVLink
	// clique. 0 gives nodes no clique label. It must divide NodesPerLeaf.
	CliqueSize int `json:"cliqueSize,omitempty"`
	// Preset names the topology label preset the nodes are labelled with
	// (see pkg/topology); default "nvidia". Its levels, tightest first, are
	// given the clique, leaf and spine names in that order; a preset with
	// fewer levels drops the loosest tiers, one with more puts every node
	// in one domain at the extra levels.
	Preset string `json:"preset,omitempty"`
	// Prefill occupies part of the fabric before the workload starts.
	Prefill *Prefill `json:"prefill,omitempty"`
	// Fleet labels the nodes' GPUs, drivers, sharing and capacity type;
	// without it nodes carry only topology labels.
	Fleet *Fleet `json:"fleet,omitempty"`
	// GPUSource is how nodes offer their GPUs: device-plugin (default:
	// allocatable nvidia.com/gpu), dra (a ResourceSlice of NVIDIA's DRA
	// driver, and no nvidia.com/gpu) or mixed (DRANodes says which nodes
	// use DRA).
	GPUSource string `json:"gpuSource,omitempty"`
	// DRANodes picks the nodes that publish their GPUs through DRA when
	// GPUSource is mixed.
	DRANodes *DRANodes `json:"draNodes,omitempty"`
	// Rails, when set, makes the fabric rail-optimized: every DRA node
	// also publishes one RDMA NIC per GPU (see Rails).
	Rails *Rails `json:"rails,omitempty"`
}

// Prefill occupies GPUs with pods bound straight to nodes, which run until
// the end of the run.
type Prefill struct {
	// Fraction of all GPUs to occupy, in [0, 1).
	Fraction float64 `json:"fraction"`
	// Layout is "scattered" (default): GPU slots drawn at random across the
	// fabric, which leaves few whole nodes, cliques or leaves free; or
	// "packed": whole nodes drawn at random, then one partial node.
	Layout string `json:"layout,omitempty"`
}

// Prefill layouts.
const (
	PrefillScattered = "scattered"
	PrefillPacked    = "packed"
)

// Workload is what the simulator submits.
type Workload struct {
	// Gangs are classes of gang arrivals.
	Gangs []GangClass `json:"gangs,omitempty"`
	// Jobs is an explicit list of gangs, each at a given time.
	Jobs []JobSpec `json:"jobs,omitempty"`
	// Pods are classes of plain single pods, outside any gang.
	Pods []PodClass `json:"pods,omitempty"`
}

// GangClass is a stream of similar gangs.
type GangClass struct {
	// Name prefixes the gangs' names; default "gang".
	Name string `json:"name,omitempty"`
	// Count is how many gangs arrive.
	Count int `json:"count"`
	// Pods is the number of members of each gang (all needed: minMember).
	Pods IntRange `json:"pods"`
	// GPUsPerPod is each member's nvidia.com/gpu request.
	GPUsPerPod IntRange `json:"gpusPerPod"`
	// Duration is how long each member runs once Running; zero runs until
	// the end of the run.
	Duration DurationRange `json:"duration,omitempty"`
	// Priority is the pods' priority; non-zero values get a PriorityClass.
	Priority int32 `json:"priority,omitempty"`
	// Topology is the gang's placement constraint, if any.
	Topology *Topology `json:"topology,omitempty"`
	// Segments make the gang hierarchical, if set.
	Segments *Segments `json:"segments,omitempty"`
	// GPU is the gang's GPU fleet policy, if any.
	GPU *GPURequirements `json:"gpu,omitempty"`
	// GPURequest is how members ask for their GPUs: extended-resource
	// (default), claim (see GPURequestClaim) or claim-with-nics (see
	// GPURequestClaimWithNICs).
	GPURequest string `json:"gpuRequest,omitempty"`
	// RailAlignment is the gang's rail alignment for gpu-gang: required,
	// preferred or none, as the PodGroup annotation
	// gpu-gang.x-k8s.io/rail-alignment; unset writes no annotation
	// (gpu-gang's default, preferred for gangs on rails).
	RailAlignment string `json:"railAlignment,omitempty"`
	// Big marks the gangs as the big jobs whose wait the domain figures
	// follow (metrics.DomainSummary): big-gang wait, evictions and the
	// domains they touch per big gang. It changes nothing in the objects.
	Big bool `json:"big,omitempty"`
	// Movable lets gpu-gang move the gangs to consolidate free domains: it
	// writes the PodGroup annotation gpu-gang.x-k8s.io/movable: "true" (of
	// either API), and nothing else.
	Movable bool `json:"movable,omitempty"`
	// Arrival says when the gangs arrive.
	Arrival Arrival `json:"arrival,omitempty"`
}

// JobSpec is one gang at a fixed time.
type JobSpec struct {
	// Name is the gang's name; default job-<index>.
	Name string `json:"name,omitempty"`
	// At is the arrival time after the run starts.
	At Duration `json:"at,omitempty"`
	// Pods, GPUsPerPod, Duration, Priority, Topology, Segments, GPU,
	// GPURequest, RailAlignment, Big and Movable are as in GangClass.
	Pods          int              `json:"pods"`
	GPUsPerPod    int              `json:"gpusPerPod"`
	Duration      Duration         `json:"duration,omitempty"`
	Priority      int32            `json:"priority,omitempty"`
	Topology      *Topology        `json:"topology,omitempty"`
	Segments      *Segments        `json:"segments,omitempty"`
	GPU           *GPURequirements `json:"gpu,omitempty"`
	GPURequest    string           `json:"gpuRequest,omitempty"`
	RailAlignment string           `json:"railAlignment,omitempty"`
	Big           bool             `json:"big,omitempty"`
	Movable       bool             `json:"movable,omitempty"`
}

// PodClass is a stream of plain pods, each outside any gang.
type PodClass struct {
	// Name prefixes the pods' names; default "pod".
	Name string `json:"name,omitempty"`
	// Count is how many pods arrive.
	Count int `json:"count"`
	// GPUs is each pod's nvidia.com/gpu request (0 for a CPU-only pod).
	GPUs IntRange `json:"gpus"`
	// Duration, Priority and GPURequest are as in GangClass.
	Duration   DurationRange `json:"duration,omitempty"`
	Priority   int32         `json:"priority,omitempty"`
	GPURequest string        `json:"gpuRequest,omitempty"`
	// Arrival says when the pods arrive.
	Arrival Arrival `json:"arrival,omitempty"`
}

// Topology is a gang's placement constraint.
type Topology struct {
	// Level is "clique", "leaf" or "spine": the fabric tier whose domain
	// should hold the whole gang.
	Level string `json:"level"`
	// Required makes the level a hard constraint: the gang waits rather
	// than span domains. The in-tree baseline only has hard constraints.
	Required bool `json:"required,omitempty"`
}

// Fabric tiers, as Topology.Level names them.
const (
	TierClique = "clique"
	TierLeaf   = "leaf"
	TierSpine  = "spine"
)

// Arrival is an arrival process.
type Arrival struct {
	// Process is "burst" (default: all at Start), "uniform" (one every
	// 1/Rate seconds) or "poisson" (exponential gaps with mean 1/Rate).
	Process string `json:"process,omitempty"`
	// Rate is arrivals per second, for uniform and poisson.
	Rate float64 `json:"rate,omitempty"`
	// Start is when the first arrival may come, after the run starts.
	Start Duration `json:"start,omitempty"`
}

// Arrival processes.
const (
	ArrivalBurst   = "burst"
	ArrivalUniform = "uniform"
	ArrivalPoisson = "poisson"
)

// Duration is a time.Duration written as a Go duration string ("90s",
// "1m30s") or as a number of seconds.
type Duration struct{ time.Duration }

// UnmarshalJSON accepts "1m30s" or 90.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		d.Duration = v
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("duration must be a string such as \"30s\" or a number of seconds: %s", b)
	}
	d.Duration = time.Duration(f * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// IntRange is an integer drawn per arrival: a plain number, {min, max}
// (uniform, inclusive) or {choices: [...]} (uniform over the list).
type IntRange struct {
	Min     int   `json:"min,omitempty"`
	Max     int   `json:"max,omitempty"`
	Choices []int `json:"choices,omitempty"`
}

// UnmarshalJSON accepts 4, {"min": 2, "max": 8} or {"choices": [2, 4, 8]}.
func (r *IntRange) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		*r = IntRange{Min: n, Max: n}
		return nil
	}
	type plain IntRange
	var p plain
	if err := strictUnmarshal(b, &p); err != nil {
		return fmt.Errorf("want a number, {min, max} or {choices}: %w", err)
	}
	*r = IntRange(p)
	return nil
}

// DurationRange is a duration drawn per arrival: a plain duration or
// {min, max} (uniform).
type DurationRange struct {
	Min Duration `json:"min,omitempty"`
	Max Duration `json:"max,omitempty"`
}

// UnmarshalJSON accepts "30s", 30 or {"min": "10s", "max": "1m"}.
func (r *DurationRange) UnmarshalJSON(b []byte) error {
	var d Duration
	if err := d.UnmarshalJSON(b); err == nil {
		*r = DurationRange{Min: d, Max: d}
		return nil
	}
	type plain DurationRange
	var p plain
	if err := strictUnmarshal(b, &p); err != nil {
		return fmt.Errorf("want a duration or {min, max}: %w", err)
	}
	*r = DurationRange(p)
	return nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
