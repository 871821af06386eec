package fleet

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
)

func TestIsAccelerator(t *testing.T) {
	for _, tc := range []struct {
		name v1.ResourceName
		want bool
	}{
		{"nvidia.com/gpu", true},
		{"nvidia.com/gpu.shared", true},
		{"nvidia.com/mig-1g.10gb", true},
		{"amd.com/gpu", true},
		{"gpu.intel.com/i915", true},
		{"rdma/hca_shared_devices_a", true},
		{"example.com/foo", true},
		{v1.ResourceCPU, false},
		{v1.ResourceMemory, false},
		{v1.ResourceEphemeralStorage, false},
		{v1.ResourcePods, false},
		{v1.ResourceStorage, false},
		// Huge pages are memory, in bytes: counting them as devices would
		// bind a CPU pod by topology and count a GB of them as a billion
		// GPUs.
		{"hugepages-2Mi", false},
		{"hugepages-1Gi", false},
		{"kubernetes.io/batch-cpu", false},
		{"example.kubernetes.io/foo", false},
		{"attachable-volumes-aws-ebs", false},
		{"requests.nvidia.com/gpu", false},
	} {
		t.Run(string(tc.name), func(t *testing.T) {
			if got := IsAccelerator(tc.name); got != tc.want {
				t.Errorf("IsAccelerator(%q) = %v, want %v", tc.name, got, tc.want)
			}
			// The same answer as Kubernetes' definition of an extended
			// resource, for every name the API server accepts.
			if k8s := v1helper.IsExtendedResourceName(tc.name); k8s != tc.want {
				t.Errorf("v1helper.IsExtendedResourceName(%q) = %v, want %v", tc.name, k8s, tc.want)
			}
		})
	}
}
