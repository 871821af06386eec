package contract

import (
	"slices"

	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
)

// nodeOnlyFilters are the Filter plugins whose verdict on a node depends on
// the pod and the node's NodeInfo only: the node object (labels, taints,
// spec) and the pods on it, all of which move the scheduler cache's
// generation for the node. A plugin whose verdict also depends on what its
// own PreFilter read maps to the key of that state (FilterInputs); the
// others map to "". Plugins that read other nodes (spread, inter-pod
// affinity), volumes, claims or holds are not among them: the test of this
// package names each in-tree Filter plugin left out, and why.
var nodeOnlyFilters = map[string]fwk.StateKey{
	names.NodeName:            "",
	names.NodeUnschedulable:   "",
	names.TaintToleration:     "",
	names.NodeAffinity:        "",
	names.NodePorts:           "",
	names.NodeResourcesFit:    "",
	config.GPUFleetPluginName: GPUFleetStateKey,
}

// NodeOnlyFilter reports whether the Filter plugin name judges a node by
// the pod and the node's NodeInfo alone, so that its verdict holds for as
// long as the NodeInfo's generation does. inputs is the CycleState key
// under which the plugin's PreFilter leaves the FilterInputs its verdict
// also depends on (ReadFilterInputs), "" when it depends on nothing else.
func NodeOnlyFilter(name string) (inputs fwk.StateKey, ok bool) {
	inputs, ok = nodeOnlyFilters[name]
	return inputs, ok
}

// NodeOnlyFilters returns the names of the node-only Filter plugins
// (NodeOnlyFilter), sorted.
func NodeOnlyFilters() []string {
	out := make([]string, 0, len(nodeOnlyFilters))
	for name := range nodeOnlyFilters {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
