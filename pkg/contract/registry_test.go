package contract

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	configtesting "k8s.io/kubernetes/pkg/scheduler/apis/config/testing"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	"k8s.io/kubernetes/test/utils/ktesting"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
)

// nodeOnlyEventsBesides says, for each in-tree node-only Filter plugin
// whose events name more than nodes and the pod itself (TargetPod), which
// resources those are and why its verdict still depends on the pod and
// the judged node's NodeInfo alone.
var nodeOnlyEventsBesides = map[string]map[fwk.EventResource]string{
	names.NodePorts: {
		fwk.AssignedPod: "a pod that leaves frees its host ports; only the pods on the judged node count, and the NodeInfo carries them",
	},
	names.NodeResourcesFit: {
		fwk.AssignedPod: "a pod that leaves or shrinks frees room; only the pods on the judged node count, and the NodeInfo carries them",
		fwk.DeviceClass: "an extended resource a DeviceClass serves is left to DynamicResources (DRAExtendedResource); " +
			"the gang plugin skips NodeResourcesFit in the runs whose verdicts it keeps (capacity is the planner's to count)",
	},
}

// notNodeOnly names every in-tree Filter plugin left out of the node-only
// list, and why: its verdict on a node depends on more than the pod and
// that node's NodeInfo.
var notNodeOnly = map[string]string{
	names.DynamicResources:      "reads ResourceClaims, ResourceSlices, DeviceClasses and the devices other pods' claims hold",
	names.InterPodAffinity:      "reads the pods on other nodes of the topology domain",
	names.PodTopologySpread:     "reads the pods on other nodes of the topology domain",
	names.VolumeBinding:         "reads PersistentVolumes, PersistentVolumeClaims, StorageClasses and CSI storage capacity",
	names.VolumeRestrictions:    "reads PersistentVolumeClaims and the pods on other nodes that use them (ReadWriteOncePod)",
	names.VolumeZone:            "reads PersistentVolumes, PersistentVolumeClaims and StorageClasses",
	names.NodeVolumeLimits:      "reads CSINodes, PersistentVolumeClaims and VolumeAttachments",
	names.NodeDeclaredFeatures:  "not reviewed for the verdict cache; pods that need no declared feature skip it, so plans keep their verdicts",
	names.DeferredPodScheduling: "not reviewed for the verdict cache; pods without a deferred resize skip it, so plans keep their verdicts",
}

// TestNodeOnlyFiltersAgainstRegistry checks the node-only list against
// kube-scheduler's in-tree registry: each listed in-tree plugin is a
// Filter plugin whose events name nothing its verdict could depend on
// beyond the pod and the node (except as nodeOnlyEventsBesides says why),
// and each in-tree Filter plugin not listed is named in notNodeOnly. A
// kube-scheduler upgrade that adds a Filter plugin, or changes the events
// of a listed one, fails here until the list is reviewed.
func TestNodeOnlyFiltersAgainstRegistry(t *testing.T) {
	registry := plugins.NewInTreeRegistry()
	built := buildInTree(t, registry)

	for _, name := range NodeOnlyFilters() {
		t.Run(name, func(t *testing.T) {
			if name == config.GPUFleetPluginName {
				inputs, _ := NodeOnlyFilter(name)
				require.Equal(t, GPUFleetStateKey, inputs, "GPUFleet's verdict depends on what its PreFilter read: the inputs join the key")
				return
			}
			pl, ok := built[name]
			require.True(t, ok, "%s is listed as node-only but kube-scheduler has no such in-tree plugin", name)
			_, ok = pl.(fwk.FilterPlugin)
			require.True(t, ok, "%s is listed as node-only but is not a Filter plugin", name)
			ext, ok := pl.(fwk.EnqueueExtensions)
			require.True(t, ok, "%s registers no events: what its verdict depends on cannot be checked", name)
			events, err := ext.EventsToRegister(ktesting.Init(t))
			require.NoError(t, err)
			for _, e := range events {
				switch r := e.Event.Resource; r {
				case fwk.Node, fwk.TargetPod:
				default:
					_, why := nodeOnlyEventsBesides[name][r]
					require.True(t, why, "%s registers %s events: its verdict may depend on more than the pod and the node; review it and the list", name, e.Event.Label())
				}
			}
		})
	}
	for name := range nodeOnlyEventsBesides {
		_, ok := NodeOnlyFilter(name)
		require.True(t, ok, "nodeOnlyEventsBesides names %s, which is not node-only", name)
	}

	var filters []string
	for name, pl := range built {
		if _, ok := pl.(fwk.FilterPlugin); ok {
			filters = append(filters, name)
		}
	}
	slices.Sort(filters)
	for _, name := range filters {
		_, nodeOnly := NodeOnlyFilter(name)
		_, excluded := notNodeOnly[name]
		require.True(t, nodeOnly != excluded, "in-tree Filter plugin %s must be either node-only or named in notNodeOnly with the reason, and not both", name)
	}
	for name := range notNodeOnly {
		require.Contains(t, filters, name, "notNodeOnly names %s, which is no in-tree Filter plugin any more", name)
	}
}

// buildInTree builds every plugin of registry on a framework handle with
// fake informers, with the args kube-scheduler's defaulting gives it.
func buildInTree(t *testing.T, registry frameworkruntime.Registry) map[string]fwk.Plugin {
	ctx := ktesting.Init(t)
	client := fake.NewClientset()
	informerFactory := informers.NewSharedInformerFactory(client, 0)
	fh, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "default-scheduler",
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithSnapshotSharedLister(internalcache.NewEmptySnapshot()))
	require.NoError(t, err)

	args := map[string]runtime.Object{}
	cfg := configtesting.V1ToInternalWithDefaults(t, configv1.KubeSchedulerConfiguration{})
	for _, pc := range cfg.Profiles[0].PluginConfig {
		args[pc.Name] = pc.Args
	}
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	slices.Sort(names)
	built := map[string]fwk.Plugin{}
	for _, name := range names {
		pl, err := registry[name](context.WithoutCancel(ctx), args[name], fh)
		require.NoError(t, err, "building %s", name)
		built[name] = pl
	}
	return built
}
