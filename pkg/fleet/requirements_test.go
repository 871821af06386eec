package fleet

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseRequirements(t *testing.T) {
	defaults := DefaultRequirements()
	with := func(edit func(*Requirements)) Requirements {
		r := DefaultRequirements()
		edit(&r)
		return r
	}
	tests := []struct {
		name       string
		group, pod map[string]string
		want       Requirements
	}{
		{name: "no annotations", want: defaults},
		{name: "unrelated annotations", group: kv("example.com/x", "y"), want: defaults},
		{
			name: "every annotation on the PodGroup",
			group: kv("gpu-gang.x-k8s.io/min-cuda", "12.4", "gpu-gang.x-k8s.io/min-compute-capability", "9.0", "gpu-gang.x-k8s.io/uniform", "nvidia.com/gpu.product",
				"gpu-gang.x-k8s.io/capacity-type", "spot", "gpu-gang.x-k8s.io/allow-shared-gpus", "true"),
			want: Requirements{MinCUDA: mustParseVersion("12.4"), MinCompute: mustParseVersion("9.0"), Uniform: NewUniformKeys("nvidia.com/gpu.product"),
				Capacity: CapacityPolicySpot, AllowSharedGPUs: true},
		},
		{
			name:  "the pod's value wins, annotation by annotation",
			group: kv("gpu-gang.x-k8s.io/min-cuda", "12.4", "gpu-gang.x-k8s.io/capacity-type", "on-demand"),
			pod:   kv("gpu-gang.x-k8s.io/min-cuda", "12.10"),
			want:  with(func(r *Requirements) { r.MinCUDA = mustParseVersion("12.10"); r.Capacity = CapacityPolicyOnDemand }),
		},
		{name: "uniform none", group: kv("gpu-gang.x-k8s.io/uniform", "none"), want: with(func(r *Requirements) { r.Uniform = UniformKeys{} })},
		{
			name:  "uniform list with spaces, the driver key and a duplicate",
			group: kv("gpu-gang.x-k8s.io/uniform", " example.com/rack-type , gpu-gang.x-k8s.io/driver-major-minor,example.com/rack-type"),
			want: with(func(r *Requirements) {
				r.Uniform = NewUniformKeys("example.com/rack-type", "gpu-gang.x-k8s.io/driver-major-minor")
			}),
		},
		{name: "capacity any", pod: kv("gpu-gang.x-k8s.io/capacity-type", "any"), want: with(func(r *Requirements) { r.Capacity = CapacityPolicyAny })},
		{name: "allow-shared-gpus false", group: kv("gpu-gang.x-k8s.io/allow-shared-gpus", "False"), want: defaults},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRequirements(tt.group, tt.pod)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseRequirementsErrors(t *testing.T) {
	tests := []struct {
		name       string
		group, pod map[string]string
		want       []string // one message per invalid annotation, in annotation order
		onPod      bool
	}{
		{
			name:  "CUDA version that is no version",
			group: kv("gpu-gang.x-k8s.io/min-cuda", "twelve"),
			want:  []string{`annotation gpu-gang.x-k8s.io/min-cuda="twelve" is not a version: it has a component "twelve" that is not a number; want a CUDA version major.minor such as "12.4"`},
		},
		{
			name:  "CUDA version with a patch level, on the pod",
			pod:   kv("gpu-gang.x-k8s.io/min-cuda", "12.4.1"),
			want:  []string{`annotation gpu-gang.x-k8s.io/min-cuda="12.4.1" has 3 components; want a CUDA version major.minor such as "12.4" (drivers report the CUDA version they support to the minor)`},
			onPod: true,
		},
		{
			name:  "empty CUDA version",
			group: kv("gpu-gang.x-k8s.io/min-cuda", ""),
			want:  []string{`annotation gpu-gang.x-k8s.io/min-cuda="" is not a version: it is empty`},
		},
		{
			name:  "compute capability with an arch suffix",
			group: kv("gpu-gang.x-k8s.io/min-compute-capability", "9.0a"),
			want:  []string{`annotation gpu-gang.x-k8s.io/min-compute-capability="9.0a" is not a version: it has a component "0a" that is not a number; want a compute capability major.minor such as "9.0"`},
		},
		{
			name:  "uniform key that is no label key",
			group: kv("gpu-gang.x-k8s.io/uniform", "nvidia.com/gpu.product,GPU product"),
			want:  []string{`annotation gpu-gang.x-k8s.io/uniform="nvidia.com/gpu.product,GPU product" has "GPU product", which is not a label key`},
		},
		{
			name:  "uniform with an empty item",
			group: kv("gpu-gang.x-k8s.io/uniform", "nvidia.com/gpu.product,,x/y"),
			want:  []string{`has an empty key at position 2; want "none", or node label keys separated by commas`},
		},
		{
			name:  "uniform none mixed with keys",
			group: kv("gpu-gang.x-k8s.io/uniform", "none,nvidia.com/gpu.product"),
			want:  []string{`mixes "none" with label keys`},
		},
		{
			name:  "empty uniform",
			group: kv("gpu-gang.x-k8s.io/uniform", " "),
			want:  []string{`annotation gpu-gang.x-k8s.io/uniform=" " is empty`},
		},
		{
			name:  "capacity policy",
			group: kv("gpu-gang.x-k8s.io/capacity-type", "Spot"),
			want:  []string{`annotation gpu-gang.x-k8s.io/capacity-type="Spot" is not a capacity-type policy; want "on-demand", "spot", "uniform" or "any" (uniform is the default)`},
		},
		{
			name:  "allow-shared-gpus",
			group: kv("gpu-gang.x-k8s.io/allow-shared-gpus", "yes"),
			want:  []string{`annotation gpu-gang.x-k8s.io/allow-shared-gpus="yes" is not a boolean; want "true" or "false"`},
		},
		{
			name:  "every problem is reported",
			group: kv("gpu-gang.x-k8s.io/min-cuda", "x", "gpu-gang.x-k8s.io/capacity-type", "cheap"),
			want:  []string{"gpu-gang.x-k8s.io/min-cuda", "gpu-gang.x-k8s.io/capacity-type"},
		},
		{
			name:  "a long value is cut short in the message",
			group: kv("gpu-gang.x-k8s.io/capacity-type", strings.Repeat("a", 500)),
			want:  []string{`aaa"... (500 bytes) is not a capacity-type policy`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRequirements(tt.group, tt.pod)
			require.Error(t, err)
			joined, ok := err.(interface{ Unwrap() []error })
			require.True(t, ok, "errors are joined")
			errs := joined.Unwrap()
			require.Len(t, errs, len(tt.want))
			for i, e := range errs {
				require.ErrorContains(t, e, tt.want[i])
				var ae *AnnotationError
				require.True(t, errors.As(e, &ae))
				require.Equal(t, tt.onPod, ae.OnPod)
			}
			require.Equal(t, DefaultRequirements(), got, "invalid annotations keep their defaults")
		})
	}
}

func TestResourceKindAndDemand(t *testing.T) {
	kinds := map[v1.ResourceName]GPUKind{
		"nvidia.com/gpu":                WholeGPU,
		"nvidia.com/gpu.shared":         SharedGPU,
		"nvidia.com/mig-1g.10gb":        MIGSlice,
		"nvidia.com/mig-3g.40gb+me":     MIGSlice,
		"nvidia.com/mig-1g.10gb.shared": SharedGPU,
		"nvidia.com/hostdev":            NotGPU,
		"nvidia.com/foo.shared":         NotGPU,
		"amd.com/gpu":                   NotGPU,
		"cpu":                           NotGPU,
	}
	for name, want := range kinds {
		require.Equal(t, want, ResourceKind(name), name)
		if want != NotGPU {
			require.True(t, IsAccelerator(name), "every NVIDIA GPU is an accelerator: %s", name)
		}
	}

	q := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
	tests := []struct {
		name string
		reqs v1.ResourceList
		want Demand
	}{
		{name: "CPU only", reqs: v1.ResourceList{v1.ResourceCPU: q(4)}},
		{name: "zero GPUs", reqs: v1.ResourceList{"nvidia.com/gpu": q(0)}},
		{name: "whole GPUs", reqs: v1.ResourceList{"nvidia.com/gpu": q(8), v1.ResourceCPU: q(4)}, want: Demand{Whole: true}},
		{name: "mixed shapes", reqs: v1.ResourceList{"nvidia.com/mig-1g.10gb": q(2), "nvidia.com/gpu.shared": q(1)}, want: Demand{Shared: true, MIG: true}},
		{name: "another vendor", reqs: v1.ResourceList{"amd.com/gpu": q(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, DemandOf(tt.reqs))
			require.Equal(t, tt.want != Demand{}, tt.want.Any())
		})
	}
}

// FuzzAnnotationsAndLabels feeds arbitrary values to every annotation and
// to the version labels: nothing panics, every annotation error is an
// *AnnotationError, and every unreadable label is reported, never used.
func FuzzAnnotationsAndLabels(f *testing.F) {
	f.Add("12.4", "9.0", "none", "spot", "true", "12.10", "05")
	f.Add("", "", "", "", "", "", "")
	f.Add("12.x", "9.0a", "a,,b", "Spot", "yes", "1..2", "-1")
	f.Fuzz(func(t *testing.T, cuda, compute, uniform, capacity, shared, label, part string) {
		group := kv("gpu-gang.x-k8s.io/min-cuda", cuda, "gpu-gang.x-k8s.io/min-compute-capability", compute,
			"gpu-gang.x-k8s.io/uniform", uniform, "gpu-gang.x-k8s.io/capacity-type", capacity, "gpu-gang.x-k8s.io/allow-shared-gpus", shared)
		r, err := ParseRequirements(group, nil)
		if err != nil {
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var ae *AnnotationError
				if !errors.As(e, &ae) {
					t.Fatalf("%v is not an *AnnotationError", e)
				}
			}
		}
		labels := kv("nvidia.com/cuda.runtime-version.full", label, "nvidia.com/cuda.runtime.major", part, "nvidia.com/cuda.runtime.minor", part,
			"nvidia.com/cuda.driver-version.full", label, "nvidia.com/gpu.compute.major", part, "nvidia.com/gpu.replicas", part,
			"nvidia.com/gpu.product", label, "karpenter.sh/capacity-type", capacity)
		facts := ReadNode(labels, nil)
		if !facts.CUDA.IsZero() {
			if _, perr := ParseVersion(facts.CUDA.String()); perr != nil {
				t.Fatalf("CUDA %q read from %v does not parse: %v", facts.CUDA, labels, perr)
			}
		}
		r.Admits(&facts, Demand{Whole: true}, nil)
		_ = r.GroupKey(labels, &facts).String()
	})
}
