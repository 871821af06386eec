package coscheduling

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/gang"
	"github.com/gpu-gang/gpu-gang/pkg/gpufleet"
	"github.com/gpu-gang/gpu-gang/pkg/plugintest"
)

// shippedConfig is the configuration the deployment ships.
const shippedConfig = "../../manifests/scheduler-config.yaml"

// withShippedProfile runs the gang plugin in the profile the scheduler
// ships: kube-scheduler's default plugins (every in-tree Filter plugin,
// DynamicResources among them) with the shipped file's changes, GPUFleet
// (reading devices as pkg/scheduler wires it), and Coscheduling with the
// file's args, so its planner is the one the preset gives. The file is read
// as kube-scheduler reads --config. The framework gets kube-scheduler's DRA
// manager (plugintest's Config.DRA); it gets no CSI manager, which
// NodeVolumeLimits reads only for pods with volumes, and these have none.
// The gang plugin keeps the environment's fake clock.
func withShippedProfile(t testing.TB) envOption { return withShippedProfileEdited(t, nil) }

// withShippedProfileWithout is withShippedProfile with the named plugins
// taken out of the profile, wherever it enables them.
func withShippedProfileWithout(t testing.TB, without ...string) envOption {
	return withShippedProfileEdited(t, func(p *schedconfig.KubeSchedulerProfile) {
		for _, set := range []*schedconfig.PluginSet{&p.Plugins.MultiPoint, &p.Plugins.PreFilter} {
			set.Enabled = slices.DeleteFunc(set.Enabled, func(pl schedconfig.Plugin) bool { return slices.Contains(without, pl.Name) })
		}
	})
}

// withShippedProfileEdited is withShippedProfile with edit applied to the
// profile (nil: none).
func withShippedProfileEdited(t testing.TB, edit func(*schedconfig.KubeSchedulerProfile)) envOption {
	cfg, err := scheduleroptions.LoadConfigFromFile(klog.Background(), shippedConfig)
	if err != nil {
		t.Fatalf("reading %s: %v", shippedConfig, err)
	}
	var profile *schedconfig.KubeSchedulerProfile
	for i := range cfg.Profiles {
		if cfg.Profiles[i].SchedulerName == plugintest.SchedulerName {
			profile = &cfg.Profiles[i]
		}
	}
	if profile == nil {
		t.Fatalf("%s has no %s profile", shippedConfig, plugintest.SchedulerName)
	}
	return func(c *envConfig) {
		c.dra = true
		c.profile = func(sources *gang.Sources, gangPlugin frameworkruntime.PluginFactory) tf.RegisterPluginFunc {
			return func(reg *frameworkruntime.Registry, p *schedconfig.KubeSchedulerProfile) {
				for name, f := range plugins.NewInTreeRegistry() {
					(*reg)[name] = f
				}
				(*reg)[Name] = gangPlugin
				(*reg)[RailFenceName] = NewRailFence
				(*reg)[gpufleet.Name] = func(ctx context.Context, obj runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
					return gpufleet.New(ctx, obj, fh, sources, gpufleet.WithDevices(capacity.ForDRAManager(ctx, fh.SharedDRAManager())))
				}
				*p = *profile.DeepCopy()
				if edit != nil {
					edit(p)
				}
			}
		}
	}
}

// shippedPluginFactory builds the gang plugin as New does, with the
// environment's fake clock.
func shippedPluginFactory(env *testEnv, sources *gang.Sources) frameworkruntime.PluginFactory {
	return func(ctx context.Context, obj runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		args, planner, err := argsAndPlanner(obj)
		if err != nil {
			return nil, err
		}
		pl, err := newPlugin(ctx, args, fh, sources, env.clock, planner)
		env.pl = pl
		return pl, err
	}
}
