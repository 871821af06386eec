// Package simulator runs a scenario's workload through one scheduler profile
// on a fresh embedded control plane, with kwok moving bound pods through
// Running to Succeeded, and measures it.
//
// The subpackages split the work by concern: scenario reads the input,
// fabric builds the nodes, workload builds and submits the jobs, lifecycle
// runs kwok, metrics watches every pod event and computes the numbers, and
// report renders them. Run ties them together for one profile; cmd/simulator
// runs each profile in a process of its own, because feature gates are
// process-wide and the in-tree baseline needs gates the others must not see.
package simulator
