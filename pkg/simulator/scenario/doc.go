// Package scenario reads simulator scenario files: the shape of a simulated
// GPU fabric and the workload to run through it.
//
// A scenario is YAML (see scenarios/README.md for every field). Load decodes
// it strictly, so a misspelt field is an error rather than a silent default,
// fills defaults and validates it; Expand turns the workload into the
// concrete, seeded list of jobs the simulator submits. The same file and seed
// always give the same jobs, so every profile in a run sees the same work.
package scenario
