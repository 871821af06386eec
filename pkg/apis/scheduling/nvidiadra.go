package scheduling

// NVIDIA's GPU DRA driver vocabulary: what the driver (k8s-dra-driver-gpu)
// publishes in ResourceSlices and what its Helm chart installs. Kubernetes
// names attributes by their driver's domain: a device attribute written
// here without a domain is device.attributes["gpu.nvidia.com"].<name> in
// CEL; the resource.kubernetes.io/ ones are Kubernetes' standard names.
const (
	// DRADriverGPU is the driver name of NVIDIA's GPU DRA driver, and the
	// domain of its device attributes. The driver publishes one
	// ResourceSlice pool per node, named after the node.
	DRADriverGPU = "gpu.nvidia.com"
	// DeviceClassGPU is the DeviceClass NVIDIA's chart installs for whole
	// GPUs, with DeviceClassGPUSelector as its selector and ResourceGPU as
	// its extendedResourceName: a pod that asks for nvidia.com/gpu is
	// served from the class's devices on nodes that do not advertise
	// nvidia.com/gpu (DRAExtendedResource, GA in Kubernetes 1.37).
	DeviceClassGPU = "gpu.nvidia.com"
	// DeviceClassGPUSelector is DeviceClassGPU's CEL selector.
	DeviceClassGPUSelector = `device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].type == "gpu"`

	// DeviceNameGPUPrefix starts each whole GPU's device name, followed by
	// the GPU's minor number: gpu-0, gpu-1, ...
	DeviceNameGPUPrefix = "gpu-"
	// DeviceTypeGPU is the DeviceAttributeType value of a whole GPU; MIG
	// slices are "mig".
	DeviceTypeGPU = "gpu"

	// Device attributes of DRADriverGPU (strings unless marked "version",
	// a semantic version).
	DeviceAttributeType         = "type"
	DeviceAttributeUUID         = "uuid"
	DeviceAttributeProductName  = "productName"
	DeviceAttributeArchitecture = "architecture"
	// DeviceAttributeCUDAComputeCapability is a version, such as 9.0.0.
	DeviceAttributeCUDAComputeCapability = "cudaComputeCapability"
	// DeviceAttributeDriverVersion is a version, such as 550.54.15.
	DeviceAttributeDriverVersion = "driverVersion"
	// DeviceAttributeCUDADriverVersion is a version: the highest CUDA
	// version the driver supports, such as 12.4.0 (GPU feature discovery's
	// LabelCUDARuntimeVersionFull).
	DeviceAttributeCUDADriverVersion = "cudaDriverVersion"
	// DeviceAttributePCIeRoot and DeviceAttributePCIBusID are Kubernetes'
	// standard attributes for a device's place on the PCIe tree.
	DeviceAttributePCIeRoot = "resource.kubernetes.io/pcieRoot"
	DeviceAttributePCIBusID = "resource.kubernetes.io/pciBusID"
	// DeviceCapacityMemory is each GPU's memory.
	DeviceCapacityMemory = "memory"
)
