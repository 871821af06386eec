package integration

// What NVIDIA's GPU DRA driver (github.com/NVIDIA/k8s-dra-driver-gpu) and
// its Helm chart put in a cluster, as the integration tests create it: the
// DeviceClasses, one ResourceSlice pool per node, and the claims and
// templates that workloads use. The shapes follow the driver's sources:
// deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-*.yaml,
// cmd/gpu-kubelet-plugin/deviceinfo.go and
// cmd/compute-domain-kubelet-plugin/deviceinfo.go.

import (
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// The GPU driver: its name, which is also the name of its DeviceClass for
// whole GPUs, and that class's selector.
const (
	gpuDriver        = "gpu.nvidia.com"
	gpuClassName     = "gpu.nvidia.com"
	gpuClassSelector = `device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'`
)

// The standard attributes the driver sets from sysfs
// (k8s.io/dynamic-resource-allocation/deviceattribute).
const (
	attrPCIBusID resourceapi.QualifiedName = "resource.kubernetes.io/pciBusID"
	attrPCIeRoot resourceapi.QualifiedName = "resource.kubernetes.io/pcieRoot"
)

// gpuClass is the chart's DeviceClass for whole GPUs. mapped adds what the
// chart sets on resource.k8s.io/v1, extendedResourceName: nvidia.com/gpu,
// so that a pod asking for nvidia.com/gpu is served from these devices on
// nodes that do not advertise nvidia.com/gpu.
func gpuClass(mapped bool) *resourceapi.DeviceClass {
	c := deviceClass(gpuClassName, gpuClassSelector)
	if mapped {
		c.Spec.ExtendedResourceName = ptr.To(string(gpu))
	}
	return c
}

func deviceClass(name, selector string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: selector}}},
		},
	}
}

// gpuModel is what the driver reads from NVML about a node's GPUs. Versions
// are written as NVML and people write them ("12.4", "535.104.05"); the
// driver publishes them as semantic versions (see semver).
type gpuModel struct {
	count                    int
	productName, arch        string
	driver, cuda, capability string
	memory                   string
}

// The GPUs of the tests' nodes: an HGX H100 node, and a GB200 NVL72 compute
// tray, which has 4 GPUs and reaches the other trays of its rack over
// multi-node NVLink (ComputeDomains).
var (
	h100DRA  = gpuModel{count: 8, productName: "NVIDIA H100 80GB HBM3", arch: "Hopper", driver: "550.54.15", cuda: "12.4", capability: "9.0", memory: "80Gi"}
	gb200DRA = gpuModel{count: 4, productName: "NVIDIA GB200", arch: "Blackwell", driver: "570.124.06", cuda: "12.8", capability: "10.0", memory: "186Gi"}
)

// withDriver is the model on another driver, which supports CUDA up to cuda.
func (m gpuModel) withDriver(driver, cuda string) gpuModel {
	m.driver, m.cuda = driver, cuda
	return m
}

// semver writes a version as a semantic version, which the API requires
// of version attributes: three parts ("12.4" is "12.4.0", as the driver's
// semver.MustParse(...).String() writes it), without leading zeros
// ("535.104.05" is "535.104.5").
func semver(v string) string {
	parts := strings.Split(v, ".")
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("version %q: %v", v, err))
		}
		parts[i] = strconv.FormatUint(n, 10)
	}
	return strings.Join(parts, ".")
}

// hgxBusIDs are the PCI buses of an HGX board's eight GPUs.
var hgxBusIDs = []int{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}

// gpuDevices are the devices gpu-0, gpu-1, ... the driver publishes for a
// node's GPUs, with the attributes and capacity of
// cmd/gpu-kubelet-plugin/deviceinfo.go.
func gpuDevices(node string, m gpuModel) []resourceapi.Device {
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
	ver := func(s string) resourceapi.DeviceAttribute {
		return resourceapi.DeviceAttribute{VersionValue: ptr.To(semver(s))}
	}
	nodeID := crc32.ChecksumIEEE([]byte(node))
	devices := make([]resourceapi.Device, m.count)
	for i := range devices {
		bus := hgxBusIDs[i%len(hgxBusIDs)]
		devices[i] = resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type":                  str("gpu"),
				"uuid":                  str(fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", nodeID, i)),
				"productName":           str(m.productName),
				"brand":                 str("Nvidia"),
				"architecture":          str(m.arch),
				"cudaComputeCapability": ver(m.capability),
				"driverVersion":         ver(m.driver),
				"cudaDriverVersion":     ver(m.cuda),
				attrPCIBusID:            str(fmt.Sprintf("0000:%02x:00.0", bus)),
				attrPCIeRoot:            str(fmt.Sprintf("pci0000:%02x", bus&0xf0)),
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: resource.MustParse(m.memory)},
			},
		}
	}
	return devices
}

// nodeSlice is the one ResourceSlice of a driver's pool for a node: the
// kubelet plugins name the pool after the node.
func nodeSlice(node, driver string, devices []resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   driver,
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
			Devices:  devices,
		},
	}
}

// draNode starts a node whose GPUs reach pods through DRA only: it
// advertises no nvidia.com/gpu, as where NVIDIA's DRA driver replaced the
// device plugin. Publish its GPUs with publishGPUs.
func draNode(name string) *st.NodeWrapper {
	return st.MakeNode().Name(name).Label(v1.LabelHostname, name).Capacity(map[v1.ResourceName]string{
		v1.ResourceCPU:    "96",
		v1.ResourceMemory: "1Ti",
		v1.ResourcePods:   "110",
	})
}

// gpuClaimSpec asks for count whole GPUs of the chart's class.
func gpuClaimSpec(count int) resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpus",
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: gpuClassName,
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           int64(count),
		},
	}}}}
}

// fromTemplate is a pod's claim on a claim of its own, which the resource
// claim controller creates from the template: the shape of a training
// job's pod template.
func fromTemplate(name, template string) v1.PodResourceClaim {
	return v1.PodResourceClaim{Name: name, ResourceClaimTemplateName: ptr.To(template)}
}

// namedClaim is a pod's claim on an existing ResourceClaim.
func namedClaim(name, claim string) v1.PodResourceClaim {
	return v1.PodResourceClaim{Name: name, ResourceClaimName: ptr.To(claim)}
}

// withClaims adds claims to a pod and lets each of its containers use them,
// as a pod that runs on the claimed devices does.
func withClaims(pod *v1.Pod, claims ...v1.PodResourceClaim) *v1.Pod {
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, claims...)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		for _, claim := range claims {
			c.Resources.Claims = append(c.Resources.Claims, v1.ResourceClaim{Name: claim.Name})
		}
	}
	return pod
}

// cpuOnly is a container's requests for one CPU and some memory, beside
// GPUs that come through claims.
func cpuOnly() map[v1.ResourceName]string {
	return map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}
}
