package scenario

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Job is one unit of submitted work: a gang, or a plain pod (Gang false,
// Pods 1).
type Job struct {
	// Name is unique in the run; it names the PodGroup and prefixes pods.
	Name string
	// Gang is false for a plain pod outside any gang.
	Gang bool
	// At is the arrival time after the run starts.
	At time.Duration
	// Pods is the number of members; all of them are needed.
	Pods int
	// GPUsPerPod is each member's nvidia.com/gpu request.
	GPUsPerPod int
	// Duration is how long each member runs once Running; zero means until
	// the end of the run.
	Duration time.Duration
	// Priority is the members' priority.
	Priority int32
	// Topology is the gang's constraint, or nil.
	Topology *Topology
	// Segments, if set, make the gang hierarchical; see Quorum.
	Segments *Segments
	// GPU is the gang's GPU fleet policy, or nil for gpu-gang's defaults.
	GPU *GPURequirements
	// GPURequest is how each member asks for its GPUs: GPURequestClaim,
	// GPURequestClaimWithNICs, or GPURequestExtendedResource (also when
	// empty).
	GPURequest string
	// RailAlignment is the gang's rail alignment for gpu-gang, or empty
	// for its default.
	RailAlignment string
	// Big marks one of the big gangs the domain figures follow; Movable a
	// gang gpu-gang may move (GangClass.Big, GangClass.Movable).
	Big     bool
	Movable bool
}

// ClaimsGPUs reports whether each member takes its GPUs through a
// ResourceClaim rather than an nvidia.com/gpu request.
func (j *Job) ClaimsGPUs() bool {
	return (j.GPURequest == GPURequestClaim || j.GPURequest == GPURequestClaimWithNICs) && j.GPUsPerPod > 0
}

// ClaimsNICs reports whether each member's claim also takes one RDMA NIC
// per GPU, paired with it under its PCIe root.
func (j *Job) ClaimsNICs() bool { return j.GPURequest == GPURequestClaimWithNICs && j.GPUsPerPod > 0 }

// Expand draws the scenario's jobs, ordered by arrival then name. Each class
// draws from its own random stream derived from the seed and the class's
// position, so editing one class leaves the others' draws unchanged.
func Expand(s *Scenario) []Job {
	var jobs []Job
	for i, g := range s.Workload.Gangs {
		rng := rand.New(rand.NewPCG(uint64(s.Seed), uint64(1000+i)))
		times := arrivals(g.Arrival, g.Count, rng)
		width := len(fmt.Sprint(g.Count - 1))
		for k := range g.Count {
			jobs = append(jobs, Job{
				Name:          fmt.Sprintf("%s-%0*d", g.Name, width, k),
				Gang:          true,
				At:            times[k],
				Pods:          g.Pods.Draw(rng),
				GPUsPerPod:    g.GPUsPerPod.Draw(rng),
				Duration:      g.Duration.Draw(rng),
				Priority:      g.Priority,
				Topology:      g.Topology,
				Segments:      g.Segments,
				GPU:           g.GPU,
				GPURequest:    g.GPURequest,
				RailAlignment: g.RailAlignment,
				Big:           g.Big,
				Movable:       g.Movable,
			})
		}
	}
	for _, j := range s.Workload.Jobs {
		jobs = append(jobs, Job{
			Name: j.Name, Gang: true, At: j.At.Duration, Pods: j.Pods, GPUsPerPod: j.GPUsPerPod,
			Duration: j.Duration.Duration, Priority: j.Priority, Topology: j.Topology, Segments: j.Segments, GPU: j.GPU,
			GPURequest: j.GPURequest, RailAlignment: j.RailAlignment, Big: j.Big, Movable: j.Movable,
		})
	}
	for i, c := range s.Workload.Pods {
		rng := rand.New(rand.NewPCG(uint64(s.Seed), uint64(2000+i)))
		times := arrivals(c.Arrival, c.Count, rng)
		width := len(fmt.Sprint(c.Count - 1))
		for k := range c.Count {
			jobs = append(jobs, Job{
				Name:       fmt.Sprintf("%s-%0*d", c.Name, width, k),
				At:         times[k],
				Pods:       1,
				GPUsPerPod: c.GPUs.Draw(rng),
				Duration:   c.Duration.Draw(rng),
				Priority:   c.Priority,
				GPURequest: c.GPURequest,
			})
		}
	}
	slices.SortStableFunc(jobs, func(a, b Job) int {
		if c := cmp.Compare(a.At, b.At); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return jobs
}

// arrivals returns n arrival times of the process.
func arrivals(a Arrival, n int, rng *rand.Rand) []time.Duration {
	out := make([]time.Duration, n)
	t := a.Start.Duration
	for k := range out {
		switch a.Process {
		case ArrivalUniform:
			if k > 0 {
				t += time.Duration(float64(time.Second) / a.Rate)
			}
		case ArrivalPoisson:
			t += time.Duration(rng.ExpFloat64() / a.Rate * float64(time.Second))
		}
		out[k] = t
	}
	return out
}

// Draw picks a value from the range.
func (r IntRange) Draw(rng *rand.Rand) int {
	if len(r.Choices) > 0 {
		return r.Choices[rng.IntN(len(r.Choices))]
	}
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + rng.IntN(r.Max-r.Min+1)
}

// Largest is the largest value Draw can return.
func (r IntRange) Largest() int {
	if len(r.Choices) > 0 {
		return slices.Max(r.Choices)
	}
	return max(r.Min, r.Max)
}

// Draw picks a duration from the range, to the millisecond.
func (r DurationRange) Draw(rng *rand.Rand) time.Duration {
	if r.Max.Duration <= r.Min.Duration {
		return r.Min.Duration
	}
	span := int64((r.Max.Duration - r.Min.Duration) / time.Millisecond)
	return r.Min.Duration + time.Duration(rng.Int64N(span+1))*time.Millisecond
}
