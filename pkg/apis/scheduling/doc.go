// Package scheduling is gpu-gang's shared vocabulary: the labels and
// annotations users put on pods and PodGroups, the topology level presets and
// the rules a list of levels must follow, and the reasons the scheduler and
// the status controller both write.
//
// The scheduler plugins, the PodGroup status controller and the simulator all
// learn names from here. None of them imports another to learn a name, and no
// name is written down twice.
package scheduling
