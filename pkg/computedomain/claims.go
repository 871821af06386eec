package computedomain

import (
	"encoding/json"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
)

// Role is what a claim is to ComputeDomains.
type Role int

const (
	// None: the claim takes nothing of a domain (a GPU claim, or a device
	// of the driver that is neither channel nor daemon).
	None Role = iota
	// Channel: the claim takes a domain's channel; its pod is one of the
	// domain's workers.
	Channel
	// Daemon: the claim is the driver's IMEX daemon of a domain; it runs
	// where its domain runs, and its pod is no worker.
	Daemon
)

func (r Role) String() string {
	switch r {
	case Channel:
		return "channel"
	case Daemon:
		return "daemon"
	}
	return "none"
}

// Claim is what Classify reads of a ResourceClaim.
type Claim struct {
	// Role is the claim's role.
	Role Role
	// Domain is the domain's UID from the driver's opaque config, "" when
	// the claim carries none (a channel class asked without config).
	Domain string
}

// Classify says what claim is to ComputeDomains. The driver's opaque
// config decides first: its kind (ComputeDomainChannelConfig or
// ComputeDomainDaemonConfig) gives the role and its domainID the domain.
// Without it, the requests' DeviceClasses and then the allocated devices'
// names (channel-N, daemon-N) give the role. A channel wins over a daemon
// when a claim shows both, since its pod is then a worker.
func Classify(claim *resourceapi.ResourceClaim) Claim {
	var configs []*resourceapi.OpaqueDeviceConfiguration
	for _, c := range claim.Spec.Devices.Config {
		configs = append(configs, c.Opaque)
	}
	if a := claim.Status.Allocation; a != nil {
		for _, c := range a.Devices.Config {
			configs = append(configs, c.Opaque)
		}
	}
	var daemon Claim
	for _, o := range configs {
		role, domain := opaqueConfig(o)
		switch {
		case role == Channel && domain != "":
			return Claim{Role: Channel, Domain: domain}
		case role == Daemon && domain != "" && daemon.Domain == "":
			daemon = Claim{Role: Daemon, Domain: domain}
		}
	}
	channel, isDaemon := false, daemon.Role == Daemon
	class := func(name string) {
		switch name {
		case scheduling.DeviceClassComputeDomainChannel:
			channel = true
		case scheduling.DeviceClassComputeDomainDaemon:
			isDaemon = true
		}
	}
	for _, r := range claim.Spec.Devices.Requests {
		if r.Exactly != nil {
			class(r.Exactly.DeviceClassName)
		}
		for _, sub := range r.FirstAvailable {
			class(sub.DeviceClassName)
		}
	}
	if a := claim.Status.Allocation; a != nil {
		for _, r := range a.Devices.Results {
			if r.Driver != scheduling.DRADriverComputeDomain {
				continue
			}
			switch {
			case strings.HasPrefix(r.Device, scheduling.ComputeDomainChannelDevicePrefix):
				channel = true
			case strings.HasPrefix(r.Device, scheduling.ComputeDomainDaemonDevicePrefix):
				isDaemon = true
			}
		}
	}
	switch {
	case channel:
		return Claim{Role: Channel}
	case isDaemon:
		return Claim{Role: Daemon, Domain: daemon.Domain}
	}
	return Claim{}
}

// opaqueConfig reads the role and domain UID of the driver's opaque
// config; None for another driver's or another kind.
func opaqueConfig(o *resourceapi.OpaqueDeviceConfiguration) (Role, string) {
	if o == nil || o.Driver != scheduling.DRADriverComputeDomain {
		return None, ""
	}
	var cfg struct {
		Kind     string `json:"kind"`
		DomainID string `json:"domainID"`
	}
	if err := json.Unmarshal(o.Parameters.Raw, &cfg); err != nil {
		return None, ""
	}
	switch cfg.Kind {
	case scheduling.ComputeDomainChannelConfigKind:
		return Channel, cfg.DomainID
	case scheduling.ComputeDomainDaemonConfigKind:
		return Daemon, cfg.DomainID
	}
	return None, ""
}
