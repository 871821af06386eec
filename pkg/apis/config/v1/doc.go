// Package v1 is the versioned, user-facing form of gpu-gang's plugin
// arguments: kubescheduler.config.k8s.io/v1, kinds CoschedulingArgs and
// GPUFleetArgs. CoschedulingArgs' field names match scheduler-plugins'
// Coscheduling where the meaning is the same, so existing configurations
// keep working.
//
// +k8s:deepcopy-gen=package
package v1
