package scheduling

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// HostnameKey is the label key that names the node level in a Policy. The
// node level is implicit in every hierarchy and is keyed by the node's name,
// not by the label's value, so nodes that lack the label still have it.
const HostnameKey = "kubernetes.io/hostname"

// DefaultPreset is the preset the Coscheduling plugin's args default to and
// the simulated fabric gpu-gang ships with: NVLink cliques under leaf
// switches under spines.
const DefaultPreset = "nvidia"

// Level is one level of the interconnect hierarchy.
type Level struct {
	// Key is the node label whose value names the node's domain at this level.
	Key string
	// Name is a singular noun for people ("leaf", "NVLink domain"), used in
	// plan summaries and fit errors.
	Name string
}

// presets maps preset names to levels, tightest first. Only ResolveLevels and
// Preset read it, and both hand out copies.
var presets = map[string][]Level{
	// GPU Operator's GPU feature discovery labels multi-node NVLink
	// (GB200 NVL72 and the like) with the clique a node's GPUs belong to.
	"nvlink": {
		{Key: LabelGPUClique, Name: "NVLink domain"},
	},
	// NVIDIA Topograph's default labels. Topograph leaves the accelerator
	// label unset when nvidia.com/gpu.clique exists; use DefaultPreset (or
	// an explicit list) for such clusters.
	"topograph": {
		{Key: "network.topology.nvidia.com/accelerator", Name: "accelerator domain"},
		{Key: "network.topology.nvidia.com/leaf", Name: "leaf"},
		{Key: "network.topology.nvidia.com/spine", Name: "spine"},
		{Key: "network.topology.nvidia.com/core", Name: "core"},
	},
	// Topograph's newer label schema: tiers count up from the switch closest
	// to the node.
	"topograph-v2": {
		{Key: "accelerator.topograph.run/domain", Name: "accelerator domain"},
		{Key: "fabric.topograph.run/tier-1", Name: "tier-1 switch"},
		{Key: "fabric.topograph.run/tier-2", Name: "tier-2 switch"},
		{Key: "fabric.topograph.run/tier-3", Name: "tier-3 switch"},
	},
	// EKS network topology labels: layer 3 is the network node closest to
	// the instance, layer 1 the farthest.
	"aws": {
		{Key: "topology.k8s.aws/network-node-layer-3", Name: "layer-3 network node"},
		{Key: "topology.k8s.aws/network-node-layer-2", Name: "layer-2 network node"},
		{Key: "topology.k8s.aws/network-node-layer-1", Name: "layer-1 network node"},
	},
	// GKE compact placement labels: host, then sub-block, then block.
	"gke": {
		{Key: "cloud.google.com/gce-topology-host", Name: "host"},
		{Key: "cloud.google.com/gce-topology-subblock", Name: "subblock"},
		{Key: "cloud.google.com/gce-topology-block", Name: "block"},
	},
	// CoreWeave: the NVLink domain, then the InfiniBand leaf group and
	// superpod. CoreWeave also writes fabric-agnostic
	// backend.coreweave.cloud/leafgroup; list it explicitly on RoCE fabrics.
	"coreweave": {
		{Key: "ds.coreweave.com/nvlink.domain", Name: "NVLink domain"},
		{Key: "ib.coreweave.cloud/leafgroup", Name: "leafgroup"},
		{Key: "ib.coreweave.cloud/superpod", Name: "superpod"},
	},
	// DefaultPreset: the GPU Operator's clique label under Topograph's leaf
	// and spine labels, as the simulated fabric writes them.
	DefaultPreset: {
		{Key: LabelGPUClique, Name: "NVLink domain"},
		{Key: LabelLeaf, Name: "leaf"},
		{Key: LabelSpine, Name: "spine"},
	},
}

// PresetNames returns the names of the known presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for name := range presets {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Preset returns a copy of the levels of the named preset, tightest first.
func Preset(name string) ([]Level, bool) {
	levels, ok := presets[name]
	return slices.Clone(levels), ok
}

// ResolveLevels turns configuration into levels: either the name of a preset
// or an explicit list of label keys, tightest first. Exactly one must be set,
// so that a typo in a preset name cannot silently fall back to a default.
// Levels from an explicit list are named after the last part of their key.
func ResolveLevels(preset string, keys []string) ([]Level, error) {
	switch {
	case preset != "" && len(keys) > 0:
		return nil, fmt.Errorf("topology preset %q and %d explicit levels are both set; set one", preset, len(keys))
	case preset != "":
		levels, ok := Preset(preset)
		if !ok {
			return nil, fmt.Errorf("unknown topology preset %q; known presets: %s", preset, strings.Join(PresetNames(), ", "))
		}
		return levels, nil
	case len(keys) > 0:
		levels := make([]Level, len(keys))
		for i, key := range keys {
			levels[i] = Level{Key: key, Name: nameFromKey(key)}
		}
		if err := ValidateLevels(levels); err != nil {
			return nil, err
		}
		return levels, nil
	}
	return nil, errors.New("no topology levels: set a preset or a list of node label keys")
}

// ValidateLevels checks that every level has a valid, distinct label key and
// that the node level is not listed (it is always there). The error names
// each bad entry by its index; nil means the levels are usable. No levels at
// all is valid: the planner then packs nodes only.
func ValidateLevels(levels []Level) error {
	var errs []error
	seen := make(map[string]int, len(levels))
	for i, lv := range levels {
		switch {
		case lv.Key == "":
			errs = append(errs, fmt.Errorf("levels[%d]: label key is empty", i))
			continue
		case lv.Key == HostnameKey:
			errs = append(errs, fmt.Errorf("levels[%d] %q: the node level is implicit; leave it out", i, lv.Key))
			continue
		}
		if err := validateLabelKey(lv.Key); err != nil {
			errs = append(errs, fmt.Errorf("levels[%d] %q: %w", i, lv.Key, err))
			continue
		}
		if j, dup := seen[lv.Key]; dup {
			errs = append(errs, fmt.Errorf("levels[%d] %q: duplicate of levels[%d]", i, lv.Key, j))
			continue
		}
		seen[lv.Key] = i
	}
	return errors.Join(errs...)
}

// ErrUnknownLevel is wrapped by LevelRank's error for a key that names no
// configured level. Waiting will not help a gang whose policy names one, so
// callers report it as unresolvable rather than as a fit failure.
var ErrUnknownLevel = errors.New("unknown topology level")

// LevelRank says how tight the level named by key is among levels
// (tightest first, as ResolveLevels returns them): 0 for the node level
// (HostnameKey), i+1 for levels[i]; larger is looser. A key that names no
// level is an error wrapping ErrUnknownLevel that lists, loosest first, the
// keys that do. It is the one place a policy's key becomes a level: pkg/gang
// ranks segment levels with it, and pkg/topology's trees number their levels
// the same way.
func LevelRank(levels []Level, key string) (int, error) {
	if key == HostnameKey {
		return 0, nil
	}
	for i, lv := range levels {
		if lv.Key == key {
			return i + 1, nil
		}
	}
	keys := make([]string, 0, len(levels)+1)
	for i := len(levels) - 1; i >= 0; i-- {
		keys = append(keys, levels[i].Key)
	}
	keys = append(keys, HostnameKey)
	return 0, fmt.Errorf("%w %q; this scheduler knows %s", ErrUnknownLevel, key, strings.Join(keys, ", "))
}

// RailUnit is the level of a rail-optimized fabric's scalable unit among
// levels: the one key names, or, when key is empty, the leaf level
// (LabelLeaf) when it is one of levels, else the second-tightest level
// (the tightest is an NVLink or host domain in every preset), else the
// only one; with no levels at all, the zero Level: the whole gang is one
// unit. A key that names no level (the node level included: a unit of one
// node aligns nobody) is an error wrapping ErrUnknownLevel.
func RailUnit(levels []Level, key string) (unit Level, err error) {
	named := func(k string) int { return slices.IndexFunc(levels, func(l Level) bool { return l.Key == k }) }
	switch {
	case key != "":
		if i := named(key); i >= 0 {
			return levels[i], nil
		}
		keys := make([]string, len(levels))
		for i, l := range levels {
			keys[i] = l.Key
		}
		return Level{}, fmt.Errorf("%w %q for the rails' scalable unit; name one of the configured levels: %s", ErrUnknownLevel, key, strings.Join(keys, ", "))
	case named(LabelLeaf) >= 0:
		return levels[named(LabelLeaf)], nil
	case len(levels) >= 2:
		return levels[1], nil
	case len(levels) == 1:
		return levels[0], nil
	}
	return Level{}, nil
}

// nameFromKey names a level after the part of its key that follows the
// prefix: "network.topology.nvidia.com/leaf" becomes "leaf".
func nameFromKey(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}

// validateLabelKey checks the syntax Kubernetes requires of a label key, so
// that a bad key fails at startup rather than matching no node.
func validateLabelKey(key string) error {
	if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}
