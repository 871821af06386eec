package preemption

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/gpu-gang/gpu-gang/pkg/placement"
	"github.com/gpu-gang/gpu-gang/pkg/topology"
)

// Request is one preemption question: the preemptor, as the planner sees it,
// and the running pods that could make room for it.
type Request struct {
	// Request is the preemptor exactly as the gang plugin hands it to the
	// planner: Nodes with Free as capacity is free now, before any eviction
	// (less what other gangs hold), Members in rank order, and the gang's
	// Policy. The engine never writes it.
	placement.Request
	// Priority is the preemptor's priority. Only units of strictly lower
	// priority are candidates; the engine drops the others itself.
	Priority int32
	// PreemptionPolicy is the preemptor's spec.preemptionPolicy. Never
	// evicts nothing; empty means PreemptLowerPriority, the API default.
	PreemptionPolicy v1.PreemptionPolicy
	// Now is when work lost is measured: a victim has run Now minus Started.
	Now time.Time
	// Units are the candidate victims: every running gang and plain pod the
	// plugin would allow to be evicted. Their order does not matter; the
	// engine sorts them (see the package doc). Names must be unique.
	Units []Unit
	// PDBs are the disruption budgets that pods of Units fall under, as
	// Pod.PDBs indexes them.
	PDBs []PDB
}

// UnitKind says what a unit is.
type UnitKind int

const (
	// KindGang is a running gang: evicted whole, or, above its minMember,
	// member by member (see Unit.Surplus).
	KindGang UnitKind = iota
	// KindPod is a plain pod that belongs to no gang: a victim by itself.
	KindPod
)

func (k UnitKind) String() string {
	switch k {
	case KindGang:
		return "gang"
	case KindPod:
		return "pod"
	}
	return fmt.Sprintf("UnitKind(%d)", int(k))
}

// Unit is one candidate victim: a gang, whose pods go together, or a plain
// pod.
type Unit struct {
	// Name identifies the unit as namespace/name: the PodGroup's for a
	// gang, the pod's for a plain pod. It is the last tie-breaker of the
	// cost order and appears in summaries.
	Name string
	// Kind says whether this is a gang or a plain pod.
	Kind UnitKind
	// Priority is the unit's priority: for a gang, its members'.
	Priority int32
	// Started is when the unit started running: for a gang, when its
	// minMember-th member started; for a pod, its status.startTime. Zero
	// means it has not started yet, so evicting it loses no work.
	Started time.Time
	// Pods are the unit's running (or bound) pods. A plain pod has
	// exactly one.
	Pods []Pod
	// Surplus is how many of Pods may be evicted one by one while the gang
	// keeps running: its running members above minMember. Zero for a gang
	// that must go whole and for a plain pod. It must leave at least one
	// pod: Surplus < len(Pods).
	Surplus int
	// Movable marks a unit that checkpoints and restarts cheaply: the work
	// its eviction loses is mostly recovered, so among victims of equal
	// priority it goes before units that are not movable.
	Movable bool
}

// Pod is one pod of a unit.
type Pod struct {
	// Name identifies the pod as namespace/name.
	Name string
	// Node is the index in Request.Nodes of the node the pod runs on, or -1
	// for a node outside them: evicting it then frees nothing the
	// preemptor can use, but it still goes with its gang.
	Node int
	// Request is what the pod holds on its node, in Request.Resources
	// dimensions: what evicting it gives back.
	Request placement.Vector
	// GPUs counts the accelerators the pod holds, for the cost order.
	GPUs int64
	// PDBs are the indices in Request.PDBs of the budgets whose selectors
	// match the pod.
	PDBs []int
	// Keep marks a pod that may leave only with its whole gang, never alone
	// as a surplus member: an MPI launcher or a rank-0 coordinator.
	Keep bool
}

// PDB is one PodDisruptionBudget as the plugin reads it now.
type PDB struct {
	// Name identifies the budget as namespace/name.
	Name string
	// Allowed is the budget's status.disruptionsAllowed: how many of its
	// pods may be evicted before it is violated.
	Allowed int
}

// Decision is what the engine chose: the victims, verified to make room,
// and where the preemptor goes once they are gone.
type Decision struct {
	// Victims are grouped by unit, in the engine's canonical order (see the
	// package doc): elastic members first, then whole units.
	Victims []Victim
	// Plan is the planner's plan for the preemptor on the capacity the
	// victims free: NodeOf[i] is the node for Members[i], the node to
	// nominate for it.
	Plan *placement.Plan
	// Domain is where the preemptor lands.
	Domain Domain
	// Cost is the chosen set's place in the cost order.
	Cost Cost
	// Exact is set when the search proved the set cheapest. It is false when
	// the search ran out of its budget and kept the best set found so far
	// (see the package doc).
	Exact bool
	// Summary tells people what is evicted and where the preemptor goes, for
	// Events: "evicting 2 gangs (ns/a, ns/b; 8 pods, 64 GPUs, priority at
	// most 10) to place the preemptor in spine s0".
	Summary string
}

// VictimKind says how a unit is hit.
type VictimKind int

const (
	// WholeGang evicts every pod of a gang.
	WholeGang VictimKind = iota
	// ElasticMembers evicts some members of a gang above its minMember; the
	// gang keeps running.
	ElasticMembers
	// PlainPod evicts a pod that belongs to no gang.
	PlainPod
)

func (k VictimKind) String() string {
	switch k {
	case WholeGang:
		return "whole gang"
	case ElasticMembers:
		return "elastic members"
	case PlainPod:
		return "plain pod"
	}
	return fmt.Sprintf("VictimKind(%d)", int(k))
}

// Victim is what is evicted of one unit.
type Victim struct {
	// Unit is the index of the unit in Request.Units.
	Unit int
	// Name is the unit's name.
	Name string
	// Kind says whether the whole unit goes or only some elastic members.
	Kind VictimKind
	// Pods are the indices in the unit's Pods of the pods to evict, in
	// order: all of them unless Kind is ElasticMembers.
	Pods []int
	// Priority is the unit's priority.
	Priority int32
}

// Domain names the topology domain the preemptor lands in.
type Domain struct {
	// Level is the domain's level as a label key: scheduling.HostnameKey
	// for a node, empty for the whole cluster.
	Level string
	// LevelName names the level for people: "node", "leaf", "cluster".
	LevelName string
	// Name names the domain for people: "s0-l3", "the cluster".
	Name string
	// Path is the domain's path, loosest level first; empty for the
	// cluster.
	Path []topology.PathElem
}

// String renders the domain for messages: "leaf s0-l3", "node n7", "the
// cluster".
func (d Domain) String() string {
	if d.Level == "" {
		return d.Name
	}
	return d.LevelName + " " + d.Name
}

// Cost places a victim set in the cost order; the package doc defines each
// field. Smaller is better, compared field by field in declaration order,
// then by canonical order of the victims.
type Cost struct {
	// Violations counts evicted pods beyond the disruptions their budgets
	// allow, summed over budgets.
	Violations int
	// Level is the tree level the preemptor lands at (0 the node level,
	// then the label levels tightest first, then the cluster): that of the
	// tightest domain, from the policy's level up, holding every member
	// bound by topology. A preemptor with no such member counts as landing
	// at the cluster level, wherever its pods go.
	Level int
	// Gangs counts whole gangs and plain pods evicted.
	Gangs int
	// Elastic counts gang members evicted alone.
	Elastic int
	// MaxPriority is the highest priority among the victims.
	MaxPriority int32
	// SumPriority sums the victims' priorities, each whole gang, elastic
	// member and plain pod once.
	SumPriority int64
	// UnmovableGPUSeconds sums WorkLostGPUSeconds over the victims that are
	// not Movable: the work their eviction loses for good.
	UnmovableGPUSeconds int64
	// WorkLostGPUSeconds sums over the same victims their work lost: the
	// GPUs each evicted whole gang, elastic member or plain pod holds
	// times the whole seconds since its unit started.
	WorkLostGPUSeconds int64
	// GPUs sums the GPUs of the evicted pods.
	GPUs int64
}

// Reason says why the engine evicts nothing.
type Reason string

const (
	// ReasonPolicyNever: the preemptor's preemptionPolicy is Never.
	ReasonPolicyNever Reason = "PreemptionPolicyNever"
	// ReasonFits: the preemptor fits without evicting anything.
	ReasonFits Reason = "FitsWithoutPreemption"
	// ReasonNoCandidates: no running unit has a lower priority.
	ReasonNoCandidates Reason = "NoLowerPriorityPods"
	// ReasonNoVictimSet: even evicting every lower-priority unit that
	// touches a domain would not make room there, in any domain the policy
	// allows.
	ReasonNoVictimSet Reason = "NoVictimSet"
	// ReasonNotVerified: the planner does not place the preemptor on the
	// capacity the chosen victims would free, so nothing is evicted.
	ReasonNotVerified Reason = "PlanNotVerified"
)

// NoPreemptionError says that the engine evicts nothing, and why. The plugin
// reports it as an unschedulable status; it is not a failure of the engine.
type NoPreemptionError struct {
	// Reason is a stable code for metrics and tests.
	Reason Reason
	// Message explains it for people.
	Message string
}

func (e *NoPreemptionError) Error() string { return e.Message }
