// Package config holds the internal form of gpu-gang's plugin arguments.
// Users write the versioned form (package v1) inside a
// KubeSchedulerConfiguration's pluginConfig; package scheme decodes, defaults
// and converts it, and package validation checks it.
//
// +k8s:deepcopy-gen=package
package config
