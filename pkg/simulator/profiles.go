package simulator

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// Profile names.
const (
	ProfileGpuGang = "gpu-gang"
	ProfileDefault = "default"
	ProfileInTree  = "in-tree"
	// ProfileGpuGangNative runs gpu-gang on the very objects the in-tree
	// profile runs: Kubernetes' own PodGroups (scheduling.k8s.io/v1beta1),
	// which pods name in spec.schedulingGroup.
	ProfileGpuGangNative = "gpu-gang-native"
	// ProfileInTreeTopology is in-tree set up as a careful user would for
	// a scenario whose gangs prefer a topology level: the level as the
	// PodGroup's topology key, which in-tree always enforces.
	ProfileInTreeTopology = "in-tree-topology"
	// ProfileDefaultAffinity is the stock scheduler set up as a careful
	// user would for a fleet with GPU policies: each gang member gets the
	// required node affinity pkg/fleet writes for its gang's policy.
	ProfileDefaultAffinity = "default-affinity"
)

// ProfileNames lists the profiles in the order a run compares them.
var ProfileNames = []string{ProfileGpuGang, ProfileDefault, ProfileDefaultAffinity, ProfileInTree, ProfileInTreeTopology, ProfileGpuGangNative}

// Profile is a scheduler set-up to compare.
type Profile struct {
	// Name is one of ProfileNames.
	Name string
	// Flavor is how the profile's pods express gangs.
	Flavor workload.Flavor
	// SchedulerName is the pods' spec.schedulerName.
	SchedulerName string
	// UseConfigFile runs the scheduler from gpu-gang's configuration file;
	// otherwise from a stock configuration with one default profile.
	UseConfigFile bool
	// FeatureGates are set on both kube-apiserver and kube-scheduler.
	FeatureGates []string
	// APIServerFlags are added to kube-apiserver's.
	APIServerFlags []string
	// SchedulerFlags are added to kube-scheduler's.
	SchedulerFlags []string
	// SchedulerProcess runs kube-scheduler in a process of its own
	// (Options.SchedulerCommand), so that its feature gates are its own:
	// in this process they are the in-process kube-apiserver's.
	SchedulerProcess bool
	// PreferredAsKey maps a preferred topology level to a topology key
	// (workload.Builder.PreferredAsKey).
	PreferredAsKey bool
	// FleetAffinity gives each GPU gang member the required node affinity
	// of its gang's fleet policy (fleetAffinity).
	FleetAffinity bool
}

// inTreeGates are the gates the in-tree gang and topology plugins need, on
// the API server (for the PodGroup API and the pod field) and on the
// scheduler (which then adds the plugins to its default profile by itself).
var inTreeGates = []string{"GenericWorkload=true", "TopologyAwareWorkloadScheduling=true"}

// workloadAPIFlag serves the scheduling.k8s.io/v1beta1 PodGroup API.
const workloadAPIFlag = "--runtime-config=scheduling.k8s.io/v1beta1=true"

// compositeGate and compositeAPIFlag serve Kubernetes' CompositePodGroups
// (scheduling.k8s.io/v1alpha3, KEP-6012), on top of the native PodGroup
// API they need.
const (
	compositeGate    = "CompositePodGroup=true"
	compositeAPIFlag = "--runtime-config=scheduling.k8s.io/v1alpha3=true"
)

// withComposites returns the profile set up for a workload with segmented
// jobs, which the native flavor states as CompositePodGroups: in-tree gets
// the CompositePodGroup gate on both kube-apiserver and kube-scheduler (its
// greedy alpha placement of siblings) and gpu-gang-native gets the API
// served, which its scheduler discovers by itself. The other profiles do
// not use the API and stay as they are.
func (p Profile) withComposites() Profile {
	switch p.Flavor {
	case workload.Native:
		if p.SchedulerProcess {
			p.APIServerFlags = append(slices.Clone(p.APIServerFlags), "--feature-gates="+compositeGate, compositeAPIFlag)
		} else {
			p.FeatureGates = append(slices.Clone(p.FeatureGates), compositeGate)
			p.APIServerFlags = append(slices.Clone(p.APIServerFlags), compositeAPIFlag)
		}
	}
	return p
}

// LookupProfile returns the named profile.
func LookupProfile(name string) (Profile, error) {
	switch name {
	case ProfileGpuGang:
		return Profile{Name: name, Flavor: workload.GangPlugin, SchedulerName: "gpu-gang", UseConfigFile: true,
			SchedulerFlags: []string{controlplane.SchedulerGatesFlag}}, nil
	case ProfileDefault, ProfileDefaultAffinity:
		return Profile{Name: name, Flavor: workload.Plain, SchedulerName: "default-scheduler", FleetAffinity: name == ProfileDefaultAffinity}, nil
	case ProfileInTree, ProfileInTreeTopology:
		return Profile{
			Name: name, Flavor: workload.Native, SchedulerName: "default-scheduler",
			FeatureGates:   inTreeGates,
			APIServerFlags: []string{workloadAPIFlag},
			PreferredAsKey: name == ProfileInTreeTopology,
		}, nil
	case ProfileGpuGangNative:
		// The API server serves the native API as for in-tree; gpu-gang's
		// scheduler runs as manifests/deploy/deployment.yaml runs it, with
		// GenericWorkload off, which in-process it could not be.
		return Profile{
			Name: name, Flavor: workload.Native, SchedulerName: "gpu-gang", UseConfigFile: true,
			APIServerFlags:   controlplane.NativePodGroupAPIFlags(),
			SchedulerFlags:   []string{controlplane.SchedulerGatesFlag},
			SchedulerProcess: true,
		}, nil
	}
	return Profile{}, fmt.Errorf("unknown profile %q; known profiles: %s", name, strings.Join(ProfileNames, ", "))
}

// AppliesTo reports whether the profile tells anything about the input: a
// configured baseline only where its configuration changes the objects
// (in-tree-topology: some gang prefers a level; default-affinity: some
// gang's fleet policy gives its members node affinity on these nodes).
func (p Profile) AppliesTo(in *Input) (bool, error) {
	switch {
	case p.PreferredAsKey:
		return slices.ContainsFunc(in.Jobs, func(j scenario.Job) bool {
			return j.Gang && j.Topology != nil && !j.Topology.Required
		}), nil
	case p.FleetAffinity:
		affinity := fleetAffinity(in.Layout)
		for i := range in.Jobs {
			if !in.Jobs[i].Gang || in.Jobs[i].GPUsPerPod == 0 {
				continue
			}
			a, err := affinity(&in.Jobs[i])
			if err != nil || a.Required != nil {
				return err == nil, err
			}
		}
		return false, nil
	}
	return true, nil
}

// gatesSummary says which feature gates the profile sets, and where.
func (p Profile) gatesSummary() string {
	var parts []string
	if len(p.FeatureGates) > 0 {
		parts = append(parts, strings.Join(p.FeatureGates, ","))
	}
	for _, side := range []struct {
		name  string
		flags []string
	}{{"kube-apiserver", p.APIServerFlags}, {"kube-scheduler", p.SchedulerFlags}} {
		for _, f := range side.flags {
			if gates, ok := strings.CutPrefix(f, "--feature-gates="); ok {
				parts = append(parts, side.name+": "+gates)
			}
		}
	}
	return strings.Join(parts, "; ")
}

// gatesFlag renders gates as a --feature-gates flag, or nothing.
func gatesFlag(gates []string) []string {
	if len(gates) == 0 {
		return nil
	}
	return []string{"--feature-gates=" + strings.Join(gates, ",")}
}

// schedulerConfig writes the profile's KubeSchedulerConfiguration into dir
// and returns its path: gpu-gang's file, or for the stock profiles a
// configuration with one default profile, with the shared knobs (see
// Knobs.apply) set over whatever either says.
func (p Profile) schedulerConfig(configFile, dir string, knobs Knobs) (string, error) {
	cfg := map[string]any{
		"apiVersion": "kubescheduler.config.k8s.io/v1",
		"kind":       "KubeSchedulerConfiguration",
		"profiles":   []any{map[string]any{"schedulerName": p.SchedulerName}},
	}
	if p.UseConfigFile {
		data, err := os.ReadFile(configFile)
		if err != nil {
			return "", err
		}
		cfg = map[string]any{}
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			return "", fmt.Errorf("parsing %s: %w", configFile, err)
		}
	}
	knobs.apply(cfg)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, p.Name+"-scheduler-config.yaml")
	return path, os.WriteFile(path, out, 0o600)
}
