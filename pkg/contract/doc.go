// Package contract holds what gpu-gang's scheduler plugins agree on with
// each other: the CycleState keys one plugin writes and another reads, the
// mark of a PreFilter or Filter run that is a simulation rather than a
// scheduling cycle, and the Filter plugins whose verdict on a node depends
// on nothing but the pod and that node. A plugin learns another's state
// only through this package, never by importing the other plugin.
//
// The contracts (writer, readers, content, Clone rule):
//
//   - DemandPodStateKey (demandpod.go). Written by the gang plugin
//     (Coscheduling) in the CycleState of a stand-in it runs PreFilter for;
//     read by GPUFleet's PreFilter. Holds the member whose GPU demand the
//     stand-in carries. Never written again: Clone shares it.
//   - GPUFleetStateKey (filterinputs.go). Written by GPUFleet's PreFilter;
//     read by GPUFleet's Filter (its own, concrete state) and by the gang
//     plugin's verdict cache, which sees it only as FilterInputs. Never
//     written after PreFilter: Clone shares it.
//   - NodeGroupsStateKey (nodegroups.go). Written by a PreFilter plugin
//     whose policy groups nodes (GPUFleet's uniform gangs); read by the
//     gang plugin's planner. Holds a placement.Grouper. Never written after
//     PreFilter: Clone shares it.
//   - WithSimulation / Simulated (simulation.go). Set by the gang plugin on
//     the context of the PreFilter and Filter runs it makes for members it
//     plans; read by any plugin that must tell such a run from a
//     scheduling cycle (the gang plugin skips its own PreFilter there).
//   - NodeOnlyFilter (filters.go). The Filter plugins whose verdict on a
//     node the gang plugin may keep while the node's NodeInfo does not
//     change; a test checks the list against kube-scheduler's registry.
package contract
