// Package placementtest holds what gpu-gang's tests need of placement and
// the scheduler never runs: Greedy, a topology-blind planner, and a builder
// of regular fabrics of placement.Nodes, in the style of pkg/gangtest.
package placementtest
