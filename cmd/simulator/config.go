package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	scheduleroptions "k8s.io/kubernetes/cmd/kube-scheduler/app/options"

	"github.com/gpu-gang/gpu-gang/pkg/apis/config"
	"github.com/gpu-gang/gpu-gang/pkg/apis/config/scheme"
	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// topologyOf reads the topology levels gpu-gang's configuration sets, so
// that a snapshot's fabric is read as the scheduler reads it. The file is
// decoded as kube-scheduler decodes its --config, and the Coscheduling
// plugin's args (the first profile's that has them) as the plugin decodes
// them, with the same defaults and validation: a configuration without
// them gets the plugin's default preset.
func topologyOf(configFile string) (string, []scheduling.Level, error) {
	cfg, err := scheduleroptions.LoadConfigFromFile(klog.Background(), configFile)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", configFile, err)
	}
	var obj runtime.Object
find:
	for _, p := range cfg.Profiles {
		for _, pc := range p.PluginConfig {
			if pc.Name == config.CoschedulingPluginName {
				obj = pc.Args
				break find
			}
		}
	}
	// The path the plugin names its args by, so that errors read alike.
	args, err := scheme.DecodeCoschedulingArgs(obj, field.NewPath("pluginConfig").Key(config.CoschedulingPluginName).Child("args"))
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", configFile, err)
	}
	levels, err := scheduling.ResolveLevels(args.TopologyPreset, args.TopologyLevels)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", configFile, err)
	}
	return args.TopologyPreset, levels, nil
}
