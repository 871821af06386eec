package scheduling

// NVIDIA's ComputeDomain vocabulary (k8s-dra-driver-gpu): multi-node NVLink
// on GB200/GB300 racks. A ComputeDomain (resource.nvidia.com/v1beta1) names
// a ResourceClaimTemplate; the driver's controller creates that template,
// asking for one channel of DeviceClassComputeDomainChannel with the
// domain's UID in its opaque ComputeDomainChannelConfig, and every pod of
// the workload takes a channel through it. gpu-gang reads these names from
// claims and nodes; it imports no driver module.
const (
	// DRADriverComputeDomain is the driver name of the ComputeDomain
	// kubelet plugin, which publishes one pool per node with the channel-0
	// and daemon-0 devices.
	DRADriverComputeDomain = "compute-domain.nvidia.com"
	// DeviceClassComputeDomainChannel is the DeviceClass the driver's chart
	// installs for a domain's default channel, and the class a domain's
	// workload claim template asks for.
	DeviceClassComputeDomainChannel = "compute-domain-default-channel.nvidia.com"
	// LabelComputeDomain is the node label the driver sets to a domain's
	// UID while the domain runs on the node; the driver refuses to prepare
	// a channel of another domain on a node so labelled. The driver also
	// puts it on the ResourceClaimTemplates its controller creates.
	LabelComputeDomain = "resource.nvidia.com/computeDomain"
	// ComputeDomainAPIVersion is the API version of ComputeDomain and of
	// the channel's opaque config.
	ComputeDomainAPIVersion = "resource.nvidia.com/v1beta1"
	// ComputeDomainChannelConfigKind is the kind of the opaque device
	// configuration, for driver DRADriverComputeDomain, that carries the
	// domain's UID in its domainID field.
	ComputeDomainChannelConfigKind = "ComputeDomainChannelConfig"
	// DeviceClassComputeDomainDaemon is the DeviceClass the driver's
	// controller asks for in the claim template of a domain's IMEX daemon
	// (computedomain-daemon-<domain UID>, in the driver's namespace).
	DeviceClassComputeDomainDaemon = "compute-domain-daemon.nvidia.com"
	// ComputeDomainDaemonConfigKind is the kind of the opaque device
	// configuration of a daemon claim; its domainID is the UID of the
	// domain the daemon serves.
	ComputeDomainDaemonConfigKind = "ComputeDomainDaemonConfig"
	// ComputeDomainChannelDevicePrefix and ComputeDomainDaemonDevicePrefix
	// begin the names of the devices the driver's kubelet plugin publishes
	// ("channel-0", "daemon-0": type and id).
	ComputeDomainChannelDevicePrefix = "channel-"
	ComputeDomainDaemonDevicePrefix  = "daemon-"
)
