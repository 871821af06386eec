package scenario

import (
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// DefaultTimeout bounds a profile's run when the scenario sets no timeout.
const DefaultTimeout = 10 * time.Minute

// Load reads, defaults and validates the scenario file at path.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse decodes a scenario strictly, fills defaults and validates it.
func Parse(data []byte) (*Scenario, error) {
	s := &Scenario{}
	if err := yaml.UnmarshalStrict(data, s); err != nil {
		return nil, err
	}
	SetDefaults(s)
	if errs := Validate(s); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return s, nil
}

// SetDefaults fills what a scenario may leave out.
func SetDefaults(s *Scenario) {
	if s.Timeout.Duration == 0 {
		s.Timeout.Duration = DefaultTimeout
	}
	if s.Fabric.Preset == "" {
		s.Fabric.Preset = scheduling.DefaultPreset
	}
	if p := s.Fabric.Prefill; p != nil && p.Layout == "" {
		p.Layout = PrefillScattered
	}
	setFleetDefaults(s)
	setDRADefaults(s)
	setRailsDefaults(s)
	for i := range s.Workload.Gangs {
		g := &s.Workload.Gangs[i]
		if g.Name == "" {
			g.Name = "gang"
		}
		if g.Arrival.Process == "" {
			g.Arrival.Process = ArrivalBurst
		}
	}
	for i := range s.Workload.Jobs {
		if s.Workload.Jobs[i].Name == "" {
			s.Workload.Jobs[i].Name = fmt.Sprintf("job-%d", i)
		}
	}
	for i := range s.Workload.Pods {
		p := &s.Workload.Pods[i]
		if p.Name == "" {
			p.Name = "pod"
		}
		if p.Arrival.Process == "" {
			p.Arrival.Process = ArrivalBurst
		}
	}
}

// Validate checks a defaulted scenario and returns every problem found.
func Validate(s *Scenario) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(field.NewPath("name"), "names the scenario in reports"))
	} else if !isDNSLabel(s.Name) {
		errs = append(errs, field.Invalid(field.NewPath("name"), s.Name, "must be lowercase letters, digits and '-'"))
	}
	if s.Timeout.Duration <= 0 {
		errs = append(errs, field.Invalid(field.NewPath("timeout"), s.Timeout.String(), "must be positive"))
	}
	errs = append(errs, validateFabric(&s.Fabric, field.NewPath("fabric"))...)
	errs = append(errs, validateWorkload(s, field.NewPath("workload"))...)
	return errs
}

func validateFabric(f *Fabric, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	positive := func(name string, v int) {
		if v < 1 {
			errs = append(errs, field.Invalid(path.Child(name), v, "must be at least 1"))
		}
	}
	positive("spines", f.Spines)
	positive("leavesPerSpine", f.LeavesPerSpine)
	positive("nodesPerLeaf", f.NodesPerLeaf)
	positive("gpusPerNode", f.GPUsPerNode)
	if f.CliqueSize < 0 {
		errs = append(errs, field.Invalid(path.Child("cliqueSize"), f.CliqueSize, "must not be negative"))
	} else if f.CliqueSize > 0 && f.NodesPerLeaf > 0 && f.NodesPerLeaf%f.CliqueSize != 0 {
		errs = append(errs, field.Invalid(path.Child("cliqueSize"), f.CliqueSize,
			fmt.Sprintf("must divide nodesPerLeaf (%d): a clique never crosses a leaf", f.NodesPerLeaf)))
	}
	if _, ok := scheduling.Preset(f.Preset); !ok {
		errs = append(errs, field.NotSupported(path.Child("preset"), f.Preset, scheduling.PresetNames()))
	}
	if p := f.Prefill; p != nil {
		pp := path.Child("prefill")
		if p.Fraction < 0 || p.Fraction >= 1 {
			errs = append(errs, field.Invalid(pp.Child("fraction"), p.Fraction, "must be in [0, 1)"))
		}
		if p.Layout != PrefillScattered && p.Layout != PrefillPacked {
			errs = append(errs, field.NotSupported(pp.Child("layout"), p.Layout, []string{PrefillScattered, PrefillPacked}))
		}
	}
	errs = append(errs, validateFleet(f, path.Child("fleet"))...)
	errs = append(errs, validateGPUSource(f, path)...)
	errs = append(errs, validateRails(f, path.Child("rails"))...)
	return errs
}

func validateWorkload(s *Scenario, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	w := &s.Workload
	if len(w.Gangs)+len(w.Jobs)+len(w.Pods) == 0 {
		errs = append(errs, field.Required(path, "set at least one of gangs, jobs and pods"))
	}
	names := map[string]string{}
	unique := func(p *field.Path, name string) {
		if prev, dup := names[name]; dup {
			errs = append(errs, field.Duplicate(p, name+" (also "+prev+")"))
			return
		}
		names[name] = p.String()
		if !isDNSLabel(name) {
			errs = append(errs, field.Invalid(p, name, "must be lowercase letters, digits and '-'"))
		}
	}
	for i := range w.Gangs {
		g := &w.Gangs[i]
		p := path.Child("gangs").Index(i)
		unique(p.Child("name"), g.Name)
		if g.Count < 1 {
			errs = append(errs, field.Invalid(p.Child("count"), g.Count, "must be at least 1"))
		}
		errs = append(errs, validateIntRange(&g.Pods, 1, p.Child("pods"))...)
		errs = append(errs, validateIntRange(&g.GPUsPerPod, 0, p.Child("gpusPerPod"))...)
		errs = append(errs, validateDurationRange(&g.Duration, p.Child("duration"))...)
		errs = append(errs, validateTopology(g.Topology, p.Child("topology"))...)
		errs = append(errs, validateSegments(g.Segments, g.Pods.values(), g.Topology, p.Child("segments"))...)
		errs = append(errs, validateGPU(g.GPU, p.Child("gpu"))...)
		errs = append(errs, validateGPURequest(&s.Fabric, g.GPURequest, g.GPUsPerPod.smallest(), p.Child("gpuRequest"))...)
		errs = append(errs, validateRailAlignment(g.RailAlignment, p.Child("railAlignment"))...)
		errs = append(errs, validateArrival(&g.Arrival, p.Child("arrival"))...)
		errs = append(errs, validatePreloaded(s.Preload, &g.Arrival, p.Child("arrival"))...)
	}
	for i := range w.Jobs {
		j := &w.Jobs[i]
		p := path.Child("jobs").Index(i)
		unique(p.Child("name"), j.Name)
		if j.Pods < 1 {
			errs = append(errs, field.Invalid(p.Child("pods"), j.Pods, "must be at least 1"))
		}
		if j.GPUsPerPod < 0 {
			errs = append(errs, field.Invalid(p.Child("gpusPerPod"), j.GPUsPerPod, "must not be negative"))
		}
		if j.At.Duration < 0 {
			errs = append(errs, field.Invalid(p.Child("at"), j.At.String(), "must not be negative"))
		}
		if s.Preload && j.At.Duration != 0 {
			errs = append(errs, field.Invalid(p.Child("at"), j.At.String(), "must be 0 with preload: the whole workload is created before the scheduler starts"))
		}
		if j.Duration.Duration < 0 {
			errs = append(errs, field.Invalid(p.Child("duration"), j.Duration.String(), "must not be negative"))
		}
		errs = append(errs, validateTopology(j.Topology, p.Child("topology"))...)
		errs = append(errs, validateSegments(j.Segments, []int{j.Pods}, j.Topology, p.Child("segments"))...)
		errs = append(errs, validateGPU(j.GPU, p.Child("gpu"))...)
		errs = append(errs, validateGPURequest(&s.Fabric, j.GPURequest, j.GPUsPerPod, p.Child("gpuRequest"))...)
		errs = append(errs, validateRailAlignment(j.RailAlignment, p.Child("railAlignment"))...)
	}
	for i := range w.Pods {
		c := &w.Pods[i]
		p := path.Child("pods").Index(i)
		unique(p.Child("name"), c.Name)
		if c.Count < 1 {
			errs = append(errs, field.Invalid(p.Child("count"), c.Count, "must be at least 1"))
		}
		errs = append(errs, validateIntRange(&c.GPUs, 0, p.Child("gpus"))...)
		errs = append(errs, validateDurationRange(&c.Duration, p.Child("duration"))...)
		errs = append(errs, validateGPURequest(&s.Fabric, c.GPURequest, c.GPUs.smallest(), p.Child("gpuRequest"))...)
		errs = append(errs, validateArrival(&c.Arrival, p.Child("arrival"))...)
		errs = append(errs, validatePreloaded(s.Preload, &c.Arrival, p.Child("arrival"))...)
	}
	if len(errs) == 0 {
		errs = append(errs, validateFits(s, path)...)
	}
	return errs
}

// validateFits rejects pods that no node could ever hold: they would only
// make every profile time out.
func validateFits(s *Scenario, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	most := s.Fabric.GPUsPerNode
	for i, g := range s.Workload.Gangs {
		if hi := g.GPUsPerPod.Largest(); hi > most {
			errs = append(errs, field.Invalid(path.Child("gangs").Index(i).Child("gpusPerPod"), hi, fmt.Sprintf("a node has %d GPUs", most)))
		}
	}
	for i, j := range s.Workload.Jobs {
		if j.GPUsPerPod > most {
			errs = append(errs, field.Invalid(path.Child("jobs").Index(i).Child("gpusPerPod"), j.GPUsPerPod, fmt.Sprintf("a node has %d GPUs", most)))
		}
	}
	for i, c := range s.Workload.Pods {
		if hi := c.GPUs.Largest(); hi > most {
			errs = append(errs, field.Invalid(path.Child("pods").Index(i).Child("gpus"), hi, fmt.Sprintf("a node has %d GPUs", most)))
		}
	}
	return errs
}

func validateIntRange(r *IntRange, least int, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Choices) > 0 {
		if r.Min != 0 || r.Max != 0 {
			errs = append(errs, field.Invalid(path, r, "set either choices or min and max"))
		}
		for i, c := range r.Choices {
			if c < least {
				errs = append(errs, field.Invalid(path.Child("choices").Index(i), c, fmt.Sprintf("must be at least %d", least)))
			}
		}
		return errs
	}
	if r.Min < least {
		errs = append(errs, field.Invalid(path.Child("min"), r.Min, fmt.Sprintf("must be at least %d", least)))
	}
	if r.Max < r.Min {
		errs = append(errs, field.Invalid(path.Child("max"), r.Max, "must be at least min"))
	}
	return errs
}

func validateDurationRange(r *DurationRange, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if r.Min.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("min"), r.Min.String(), "must not be negative"))
	}
	if r.Max.Duration < r.Min.Duration {
		errs = append(errs, field.Invalid(path.Child("max"), r.Max.String(), "must be at least min"))
	}
	return errs
}

func validateTopology(t *Topology, path *field.Path) field.ErrorList {
	if t == nil {
		return nil
	}
	switch t.Level {
	case TierClique, TierLeaf, TierSpine:
		return nil
	}
	return field.ErrorList{field.NotSupported(path.Child("level"), t.Level, []string{TierClique, TierLeaf, TierSpine})}
}

func validateArrival(a *Arrival, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch a.Process {
	case ArrivalBurst:
	case ArrivalUniform, ArrivalPoisson:
		if a.Rate <= 0 {
			errs = append(errs, field.Invalid(path.Child("rate"), a.Rate, "must be positive for "+a.Process+" arrivals"))
		}
	default:
		errs = append(errs, field.NotSupported(path.Child("process"), a.Process, []string{ArrivalBurst, ArrivalUniform, ArrivalPoisson}))
	}
	if a.Start.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("start"), a.Start.String(), "must not be negative"))
	}
	return errs
}

// isDNSLabel reports whether s can be part of an object name: a DNS label of
// at most 40 characters, leaving room for the suffixes names get.
func isDNSLabel(s string) bool {
	return len(s) <= 40 && len(validation.IsDNS1123Label(s)) == 0
}

// validatePreloaded checks that a preloaded scenario's arrival is a burst at
// 0 s: its workload is created before the scheduler starts.
func validatePreloaded(preload bool, a *Arrival, path *field.Path) field.ErrorList {
	if !preload || a.Process == ArrivalBurst && a.Start.Duration == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(path, fmt.Sprintf("%s from %s", a.Process, a.Start),
		"must be a burst at 0s with preload: the whole workload is created before the scheduler starts")}
}
