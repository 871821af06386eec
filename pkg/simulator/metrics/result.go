// Package metrics watches every pod event of a simulator run and turns what
// it saw into a profile's Result: throughput, per-gang latency, the time
// gangs spent partially bound, how many topology domains each gang spans
// against the fewest it could have, and occupancy over time.
package metrics

import "time"

// Result is what one profile's run measured. It is written as JSON by the
// profile's process and read back by the report.
type Result struct {
	// Profile is the scheduler profile: gpu-gang, default or in-tree.
	Profile string `json:"profile"`
	// Scenario names the scenario.
	Scenario string `json:"scenario"`
	// Started is when the first job was submitted.
	Started time.Time `json:"started"`
	// Settings records what the run was configured with.
	Settings Settings `json:"settings"`
	// Fabric is the fabric's size.
	Fabric FabricSize `json:"fabric"`
	// Summary holds the headline numbers.
	Summary Summary `json:"summary"`
	// Levels compares domains spanned with the lower bound, per level.
	Levels []LevelSummary `json:"levels"`
	// Gangs has one entry per gang, in submission order.
	Gangs []Gang `json:"gangs"`
	// Samples is occupancy over time.
	Samples []Sample `json:"samples"`
	// Placement is where pods ran at peak GPU occupancy.
	Placement *Placement `json:"placement,omitempty"`
	// Claims counts the workload's ResourceClaims; absent when no pod
	// took its GPUs through DRA.
	Claims *ClaimSummary `json:"claims,omitempty"`
	// Rails judges the rails of gang members' devices; absent unless the
	// fabric is rail-optimized.
	Rails *RailSummary `json:"rails,omitempty"`
	// Hierarchy judges the segmented jobs; absent when the workload has
	// none.
	Hierarchy *HierarchySummary `json:"hierarchy,omitempty"`
	// Domains says whether whole cliques and leaves stayed free for the
	// big gangs, and what evictions and moves cost; absent unless some
	// gang is marked big or movable.
	Domains *DomainSummary `json:"domains,omitempty"`
	// Error is set when the run itself failed; the rest may be partial.
	Error string `json:"error,omitempty"`
}

// Settings are the knobs that shape the numbers.
type Settings struct {
	// SchedulerName is the pods' spec.schedulerName.
	SchedulerName string `json:"schedulerName"`
	// SchedulerQPS and SchedulerBurst are the scheduler's client limits.
	SchedulerQPS   float32 `json:"schedulerQPS"`
	SchedulerBurst int32   `json:"schedulerBurst"`
	// ClientQPS and ClientBurst are the simulator's own client limits.
	ClientQPS   float32 `json:"clientQPS"`
	ClientBurst int     `json:"clientBurst"`
	// PartialGraceSeconds plus PartialGracePerMemberSeconds for each
	// member is how long a gang may be part-bound before it counts (see
	// Summary.PartialGangSeconds and Grace).
	PartialGraceSeconds          float64 `json:"partialGraceSeconds"`
	PartialGracePerMemberSeconds float64 `json:"partialGracePerMemberSeconds"`
	// FeatureGates are the gates set for the API server and scheduler.
	FeatureGates string `json:"featureGates,omitempty"`
}

// FabricSize counts the fabric's parts.
type FabricSize struct {
	Spines  int `json:"spines"`
	Leaves  int `json:"leaves"`
	Cliques int `json:"cliques"`
	Nodes   int `json:"nodes"`
	GPUs    int `json:"gpus"`
	// PrefilledGPUs are taken before the workload starts.
	PrefilledGPUs int `json:"prefilledGPUs"`
	// DRANodes counts the nodes that publish their GPUs through DRA, one
	// ResourceSlice each, and DRAGPUs their GPUs (counted in GPUs too).
	DRANodes int `json:"draNodes,omitempty"`
	DRAGPUs  int `json:"draGPUs,omitempty"`
	// RDMANICs counts the RDMA NICs DRA nodes of a rail-optimized fabric
	// publish, one per GPU, in a second ResourceSlice each.
	RDMANICs int `json:"rdmaNICs,omitempty"`
}

// ClaimSummary counts the ResourceClaims of a run's workload (ClaimCounter):
// those the resourceclaim controller made from the jobs' templates, and
// those the scheduler made for nvidia.com/gpu requests that DRA served.
type ClaimSummary struct {
	// Claims counts every claim made, including those given up before any
	// device was allocated to them: the resourceclaim controller makes a
	// pod's claim from its template again when the pod is already done,
	// and deletes it at once.
	Claims int `json:"claims"`
	// Allocated counts claims that got devices, AllocatedDevices those
	// devices, and ExtendedResource the allocated claims the scheduler
	// made for nvidia.com/gpu served through the DeviceClass.
	Allocated        int `json:"allocated"`
	AllocatedDevices int `json:"allocatedDevices"`
	ExtendedResource int `json:"extendedResource"`
	// Released counts allocated claims whose allocation was cleared, or
	// which were deleted, by the end: their pods were done.
	Released int `json:"released"`
}

// Summary holds a profile's headline numbers. Times are seconds from the
// first submission.
type Summary struct {
	// Jobs counts submitted jobs (gangs and plain pods), Gangs the gangs
	// among them, Pods all submitted pods.
	Jobs  int `json:"jobs"`
	Gangs int `json:"gangs"`
	Pods  int `json:"pods"`
	// BoundPods and BoundGangs count pods bound and gangs with every
	// member bound by the end of the run; SubmittedGangs the gangs whose
	// objects the run began to create (a gang due after the timeout is
	// never submitted).
	BoundPods      int `json:"boundPods"`
	BoundGangs     int `json:"boundGangs"`
	SubmittedGangs int `json:"submittedGangs"`
	// PodsPerSecond is BoundPods over the time from the first submission
	// to the last bind; GangsPerSecond is BoundGangs over the time to the
	// last gang's completion.
	PodsPerSecond  float64 `json:"podsPerSecond"`
	GangsPerSecond float64 `json:"gangsPerSecond"`
	// GangLatencyP50 and GangLatencyP99 are the submit→all-bound times of
	// every submitted gang, in seconds. A gang not bound by the end of the
	// run is censored: it counts with its time until the end, a lower
	// bound on its true latency, so that leaving a gang unbound can only
	// raise a profile's percentiles. CensoredGangs counts those gangs.
	GangLatencyP50 float64 `json:"gangLatencyP50"`
	GangLatencyP99 float64 `json:"gangLatencyP99"`
	CensoredGangs  int     `json:"censoredGangs"`
	// PartialGangSeconds adds up every span in which a gang had some but
	// not all members bound and which lasted longer than the gang's grace
	// (see Settings and Grace). Once a gang is released, its binds are
	// separate API calls that land over a moment; spans within the grace
	// are that, not a half-placed gang. A gang scheduler must show 0.
	PartialGangSeconds float64 `json:"partialGangSeconds"`
	// PartialGangs counts gangs with at least one such span.
	PartialGangs int `json:"partialGangs"`
	// RawPartialSeconds adds up every part-bound span, within the grace or
	// not; BindSpreadMaxSeconds is the longest first-to-last bind of any
	// gang that completed.
	RawPartialSeconds    float64 `json:"rawPartialSeconds"`
	BindSpreadMaxSeconds float64 `json:"bindSpreadMaxSeconds"`
	// LastBindSeconds is when the last pod bound.
	LastBindSeconds float64 `json:"lastBindSeconds"`
	// MakespanSeconds is when the last pod with a duration finished, or
	// the last bind if that is later (pods without a duration run on).
	MakespanSeconds float64 `json:"makespanSeconds"`
	// PeakOccupancy is the largest fraction of all GPUs in use at once,
	// pre-fill included.
	PeakOccupancy float64 `json:"peakOccupancy"`
	// EndSeconds is when the run ended: every pod settled, or the
	// timeout.
	EndSeconds float64 `json:"endSeconds"`
	// UsefulGPUSeconds integrates, over [0, EndSeconds], the GPUs held by
	// workload pods that can do work: members of gangs with every member
	// bound, and plain pods. Pre-fill, the same in every profile, is left
	// out. EndUsefulGPUs is what they hold when the run ends.
	UsefulGPUSeconds float64 `json:"usefulGPUSeconds"`
	EndUsefulGPUs    int     `json:"endUsefulGPUs"`
	// IdleHeldGPUSecondsToEnd integrates, over [0, EndSeconds], the GPUs
	// kept from other work with nothing running on them: those of members
	// of gangs bound only in part (a gang cannot start without all its
	// members), and what the scheduler holds with no pod bound, members
	// reserved and waiting in Permit and a gang scheduler's own plans and
	// holds (Tracker.ObserveHeld). Binds in flight count too; no grace
	// applies. EndIdleHeldGPUs is what is held at the end.
	IdleHeldGPUSecondsToEnd float64 `json:"idleHeldGPUSecondsToEnd"`
	EndIdleHeldGPUs         int     `json:"endIdleHeldGPUs"`
	// WindowSeconds is the window the two figures below are taken over:
	// the same for every profile of a run (CommonWindow), from the first
	// submission to the end of the longest run. A run that ended earlier
	// holds its end state for the rest of the window.
	WindowSeconds float64 `json:"windowSeconds"`
	// UsefulOccupancy is UsefulGPUSeconds over the window, as a fraction
	// of all GPUs.
	UsefulOccupancy float64 `json:"usefulOccupancy"`
	// IdleHeldGPUSeconds is IdleHeldGPUSecondsToEnd over the window.
	IdleHeldGPUSeconds float64 `json:"idleHeldGPUSeconds"`
	// HoldsUnread is set when what the scheduler held with no pod bound
	// (see Tracker.ObserveHeld) could not be read: its scheduler ran in a
	// process of its own. Idle-held GPU-seconds then count part-bound
	// gangs only.
	HoldsUnread bool `json:"holdsUnread,omitempty"`
	// NotExpressed names, for a baseline given node affinity for the
	// gangs' GPU fleet policies (default-affinity), the rules of those
	// policies that node affinity cannot state (fleet.Inexpressible).
	NotExpressed []string `json:"notExpressed,omitempty"`
	// SchedulerPeakRSSBytes is the scheduler's peak resident memory
	// (VmHWM) at the end of the run, read where it ran in a process of its
	// own; 0 where it shared the simulator's process with kube-apiserver.
	SchedulerPeakRSSBytes int64 `json:"schedulerPeakRSSBytes,omitempty"`
	// JointGangs counts the gangs judged against the joint bound: every
	// submitted gang that requests GPUs, bound or not (one bound gang
	// whose bound could not be computed is left out). AtJointBound counts
	// those bound with spans, read loosest level first, no worse than it;
	// a gang never bound is not at the bound.
	JointGangs   int `json:"jointGangs"`
	AtJointBound int `json:"atJointBound"`
	// TimedOut is set when the run ended at the scenario's timeout with
	// work unfinished.
	TimedOut bool `json:"timedOut"`
}

// LevelSummary compares, at one topology level, the domains gangs spanned
// with the lower bounds: the fewest domains whose free capacity when the
// gang completed (its own GPUs counted free) could have held it, for the
// level alone and jointly with the looser levels.
type LevelSummary struct {
	// Level is the level's name ("spine", "leaf", "NVLink domain", "node").
	Level string `json:"level"`
	// Gangs counts the gangs compared.
	Gangs int `json:"gangs"`
	// AtLowerBound counts gangs that spanned no more than the bound.
	AtLowerBound int `json:"atLowerBound"`
	// MeanSpanned and MeanLowerBound average over those gangs.
	MeanSpanned    float64 `json:"meanSpanned"`
	MeanLowerBound float64 `json:"meanLowerBound"`
	// ExcessDomains adds up spanned minus the level's own bound. Those
	// bounds cannot always be met together, so it can charge a gang that
	// placed as well as possible.
	ExcessDomains int `json:"excessDomains"`
	// ExcessOverJoint adds up spanned minus the joint bound's count at
	// this level, for gangs whose spans compare worse than the joint
	// bound; a gang at the joint bound adds nothing at any level.
	ExcessOverJoint int `json:"excessOverJoint"`
	// MeanJointBound averages the joint bound's count at this level.
	MeanJointBound float64 `json:"meanJointBound"`
}

// Gang is one gang's record.
type Gang struct {
	Name       string `json:"name"`
	Pods       int    `json:"pods"`
	GPUsPerPod int    `json:"gpusPerPod"`
	Priority   int32  `json:"priority,omitempty"`
	// Topology is "<level>" or "<level> (required)" when the job set one.
	Topology string `json:"topology,omitempty"`
	// Submitted, FirstBound and AllBound are seconds from the run's start;
	// AllBound is absent for a gang that never completed.
	Submitted  float64  `json:"submitted"`
	FirstBound *float64 `json:"firstBound,omitempty"`
	AllBound   *float64 `json:"allBound,omitempty"`
	// Bound counts members bound by the end.
	Bound int `json:"bound"`
	// PartialSeconds adds up the gang's part-bound spans beyond the grace.
	PartialSeconds float64 `json:"partialSeconds"`
	// Spans are, per level loosest first then nodes, the domains spanned
	// and the lower bound; absent for gangs that never completed or
	// request no GPUs.
	Spans []Span `json:"spans,omitempty"`
	// Nodes are the nodes of the members, by rank.
	Nodes []string `json:"nodes,omitempty"`
	// Rails are, on a rail-optimized fabric, the rails of each member's
	// GPUs in GPU index order ("2,3"), members by pod name, for a gang
	// judged by CountRails; RailMisaligned is set when two members'
	// differ.
	Rails          []string `json:"rails,omitempty"`
	RailMisaligned bool     `json:"railMisaligned,omitempty"`
}

// Span is one level's count for one gang.
type Span struct {
	Level   string `json:"level"`
	Domains int    `json:"domains"`
	// LowerBound is the fewest domains of this level alone that could
	// have held the gang.
	LowerBound int `json:"lowerBound"`
	// JointBound is this level's count in the lexicographic bound: the
	// fewest spines, then the fewest leaves inside them, and so on (see
	// topology.Tree.JointLowerBound).
	JointBound int `json:"jointBound"`
}

// Sample is the fabric's state at one moment.
type Sample struct {
	// T is seconds from the run's start.
	T float64 `json:"t"`
	// UsedGPUs counts GPUs held by pods bound and not finished, pre-fill
	// included.
	UsedGPUs int `json:"usedGPUs"`
	// UsefulGPUs and IdleHeldGPUs split the workload's part of UsedGPUs:
	// complete gangs and plain pods, and gangs bound only in part.
	UsefulGPUs   int `json:"usefulGPUs"`
	IdleHeldGPUs int `json:"idleHeldGPUs"`
	// FreeLeaves and FreeCliques count leaves and cliques with no GPU in
	// use.
	FreeLeaves  int `json:"freeLeaves"`
	FreeCliques int `json:"freeCliques"`
	// BoundPods and FinishedPods count workload pods so far.
	BoundPods    int `json:"boundPods"`
	FinishedPods int `json:"finishedPods"`
}

// Placement is a snapshot of which job holds which GPUs.
type Placement struct {
	// T is when it was taken, in seconds from the run's start.
	T float64 `json:"t"`
	// Nodes follow the fabric's order; each lists its pods' GPUs.
	Nodes []NodePlacement `json:"nodes"`
}

// NodePlacement is one node's pods.
type NodePlacement struct {
	Name string `json:"name"`
	// Leaf and Clique index the node's leaf and clique (-1 for none).
	Leaf   int `json:"leaf"`
	Clique int `json:"clique"`
	// LeafName names the node's leaf for people.
	LeafName string     `json:"leafName,omitempty"`
	Pods     []PodSlice `json:"pods,omitempty"`
}

// PodSlice is the GPUs one job holds on a node.
type PodSlice struct {
	// Job is the job's name; "prefill" for pre-fill pods.
	Job  string `json:"job"`
	GPUs int    `json:"gpus"`
}
