// Package placement is the seam between gang admission and placement policy.
//
// The gang plugin (pkg/coscheduling) describes a gang that must start as a
// whole as a Request: the candidate nodes with the capacity this gang may use
// right now, and the members in rank order. A Planner answers with a Plan that
// puts every member on a node, or with a *FitError that says how far it got.
// A gang of gangs (segments of a job, a CompositePodGroup's PodGroups) is one
// Request whose Hierarchy splits the members into Subgroups, each with its
// own Policy; its Plan says where each subgroup went.
//
// pkg/topology provides the planner the scheduler runs, which reads
// interconnect domains from node labels; placementtest.Greedy is a
// topology-blind one for tests. Both score best fit with BestFit. Planners never read the API server
// and never keep references into a Request after Plan returns.
package placement
