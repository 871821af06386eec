package computedomain

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// claimOf is a claim of one request for class, with the driver's opaque
// config of kind for domain when kind is set, allocated the devices.
func claimOf(t *testing.T, class, kind, domain string, devices ...string) *resourceapi.ResourceClaim {
	t.Helper()
	c := &resourceapi.ResourceClaim{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
		Requests: []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class}}},
	}}}
	if kind != "" {
		raw, err := json.Marshal(map[string]string{"apiVersion": scheduling.ComputeDomainAPIVersion, "kind": kind, "domainID": domain})
		if err != nil {
			t.Fatal(err)
		}
		c.Spec.Devices.Config = []resourceapi.DeviceClaimConfiguration{{Requests: []string{"r"}, DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: scheduling.DRADriverComputeDomain, Parameters: runtime.RawExtension{Raw: raw}},
		}}}
	}
	if len(devices) > 0 {
		c.Status.Allocation = &resourceapi.AllocationResult{}
		for _, d := range devices {
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
				Request: "r", Driver: scheduling.DRADriverComputeDomain, Pool: "n0", Device: d,
			})
		}
	}
	return c
}

func TestClassify(t *testing.T) {
	const (
		channelClass = scheduling.DeviceClassComputeDomainChannel
		daemonClass  = scheduling.DeviceClassComputeDomainDaemon
		channelKind  = scheduling.ComputeDomainChannelConfigKind
		daemonKind   = scheduling.ComputeDomainDaemonConfigKind
	)
	otherDriver := claimOf(t, "other", channelKind, "uid-a")
	otherDriver.Spec.Devices.Config[0].Opaque.Driver = scheduling.DRADriverGPU
	allocatedConfig := claimOf(t, "other", "", "", "channel-0")
	allocatedConfig.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
		Source: resourceapi.AllocationConfigSourceClass, DeviceConfiguration: claimOf(t, "", daemonKind, "uid-b").Spec.Devices.Config[0].DeviceConfiguration,
	}}
	firstAvailable := claimOf(t, "", "", "")
	firstAvailable.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{{Name: "a", DeviceClassName: channelClass}}}}
	tests := []struct {
		name  string
		claim *resourceapi.ResourceClaim
		want  Claim
	}{
		{name: "the workload template's channel claim", claim: claimOf(t, channelClass, channelKind, "uid-a"), want: Claim{Channel, "uid-a"}},
		{name: "the driver's daemon claim", claim: claimOf(t, daemonClass, daemonKind, "uid-a"), want: Claim{Daemon, "uid-a"}},
		{name: "an allocated daemon claim", claim: claimOf(t, daemonClass, daemonKind, "uid-a", "daemon-0"), want: Claim{Daemon, "uid-a"}},
		{name: "the daemon class without config", claim: claimOf(t, daemonClass, "", ""), want: Claim{Daemon, ""}},
		{name: "a daemon device under another class", claim: claimOf(t, "custom", "", "", "daemon-0"), want: Claim{Daemon, ""}},
		{name: "the channel class without config", claim: claimOf(t, channelClass, "", ""), want: Claim{Channel, ""}},
		{name: "the channel class as a firstAvailable subrequest", claim: firstAvailable, want: Claim{Channel, ""}},
		{name: "a channel device under another class", claim: claimOf(t, "custom", "", "", "channel-0"), want: Claim{Channel, ""}},
		{name: "a driver device that is neither", claim: claimOf(t, "custom", "", "", "imex-0"), want: Claim{}},
		{name: "a GPU claim", claim: claimOf(t, scheduling.DeviceClassGPU, "", ""), want: Claim{}},
		{name: "another driver's config", claim: otherDriver, want: Claim{}},
		{name: "an unknown config kind", claim: claimOf(t, "custom", "SomethingElse", "uid-a"), want: Claim{}},
		{name: "a channel device wins over a class's daemon config", claim: allocatedConfig, want: Claim{Channel, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Classify(tt.claim)); diff != "" {
				t.Errorf("Classify (-want,+got):\n%s", diff)
			}
		})
	}
}
