package fleet

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
	"github.com/gpu-gang/gpu-gang/pkg/placement"
)

const (
	h100Name = "NVIDIA H100 80GB HBM3"
	a100Name = "NVIDIA A100-SXM4-80GB"
)

// deviceWrapper builds a device of NVIDIA's GPU DRA driver, with the
// attributes the driver publishes: names without the driver's domain,
// versions as semantic versions.
type deviceWrapper struct{ d capacity.Device }

func makeDevice(name, typ string) *deviceWrapper {
	return &deviceWrapper{capacity.Device{
		ID:     structured.MakeDeviceID(scheduling.DRADriverGPU, "node", name),
		Driver: scheduling.DRADriverGPU, Pool: "node", Name: name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			scheduling.DeviceAttributeType: {StringValue: ptr.To(typ)},
		},
	}}
}

// gpuDevice is a whole GPU as the driver publishes it.
func gpuDevice(name, product, driver, cuda, compute string) *deviceWrapper {
	return makeDevice(name, scheduling.DeviceTypeGPU).
		str(scheduling.DeviceAttributeProductName, product).
		version(scheduling.DeviceAttributeDriverVersion, driver).
		version(scheduling.DeviceAttributeCUDADriverVersion, cuda).
		version(scheduling.DeviceAttributeCUDAComputeCapability, compute)
}

func (w *deviceWrapper) attr(name string, a resourceapi.DeviceAttribute) *deviceWrapper {
	w.d.Attributes[resourceapi.QualifiedName(name)] = a
	return w
}
func (w *deviceWrapper) str(name, v string) *deviceWrapper {
	return w.attr(name, resourceapi.DeviceAttribute{StringValue: ptr.To(v)})
}
func (w *deviceWrapper) version(name, v string) *deviceWrapper {
	return w.attr(name, resourceapi.DeviceAttribute{VersionValue: ptr.To(v)})
}
func (w *deviceWrapper) without(name string) *deviceWrapper {
	delete(w.d.Attributes, resourceapi.QualifiedName(name))
	return w
}
func (w *deviceWrapper) driver(name string) *deviceWrapper {
	w.d.Driver = name
	return w
}
func (w *deviceWrapper) obj() capacity.Device { return w.d }

func devices(ws ...*deviceWrapper) []capacity.Device {
	out := make([]capacity.Device, len(ws))
	for i, w := range ws {
		out[i] = w.obj()
	}
	return out
}

// h100s is n H100 GPUs on driver 550.54.15, CUDA 12.4.
func h100s(n int) []*deviceWrapper {
	out := make([]*deviceWrapper, n)
	for i := range out {
		out[i] = gpuDevice(fmt.Sprint("gpu-", i), h100Name, "550.54.15", "12.4.0", "9.0.0")
	}
	return out
}

func TestReadDevices(t *testing.T) {
	type want struct {
		devices                int
		cuda, compute, driver  string
		products, driverMinors []string
		mig                    bool
		problems               []string // attribute=value of each problem
	}
	tests := []struct {
		name    string
		devices []capacity.Device
		want    want
	}{
		{name: "no devices"},
		{
			name:    "eight identical GPUs",
			devices: devices(h100s(8)...),
			want: want{devices: 8, cuda: "12.4.0", compute: "9.0.0", driver: "550.54.15",
				products: []string{h100Name}, driverMinors: []string{"550.54"}},
		},
		{
			name: "names with the driver's domain are read, and win over the bare name",
			devices: devices(makeDevice("gpu-0", scheduling.DeviceTypeGPU).
				version("gpu.nvidia.com/cudaDriverVersion", "12.8.0").version("cudaDriverVersion", "12.2.0").
				str("gpu.nvidia.com/productName", h100Name)),
			want: want{devices: 1, cuda: "12.8.0", products: []string{h100Name}},
		},
		{
			name: "a mixed node: the lowest versions, every product and driver",
			devices: devices(
				gpuDevice("gpu-0", h100Name, "550.54.15", "12.4.0", "9.0.0"),
				gpuDevice("gpu-1", a100Name, "535.104.5", "12.2.0", "8.0.0"),
				gpuDevice("gpu-2", h100Name, "550.127.8", "12.4.0", "9.0.0")),
			want: want{devices: 3, cuda: "12.2.0", compute: "8.0.0", driver: "535.104.5",
				products: []string{a100Name, h100Name}, driverMinors: []string{"535.104", "550.54", "550.127"}},
		},
		{
			name:    "one device that does not say leaves the node saying nothing",
			devices: devices(h100s(1)[0], gpuDevice("gpu-1", h100Name, "550.54.15", "12.4.0", "9.0.0").without("cudaDriverVersion").without("productName")),
			want:    want{devices: 2, compute: "9.0.0", driver: "550.54.15", driverMinors: []string{"550.54"}},
		},
		{
			name: "MIG slices are read; other drivers and device types are not",
			devices: devices(
				gpuDevice("gpu-0-mig-1g.10gb-0", h100Name, "550.54.15", "12.4.0", "9.0.0").str("type", scheduling.DeviceTypeMIG),
				gpuDevice("nic-0", "ConnectX-7", "24.1.0", "1.0.0", "1.0.0").driver("rdma.example.com"),
				gpuDevice("channel-0", "", "1.0.0", "1.0.0", "1.0.0").str("type", "channel")),
			want: want{devices: 1, cuda: "12.4.0", compute: "9.0.0", driver: "550.54.15",
				products: []string{h100Name}, driverMinors: []string{"550.54"}, mig: true},
		},
		{
			name: "build metadata is dropped; a version written as a string is read",
			devices: devices(gpuDevice("gpu-0", h100Name, "550.54.15+build.7", "12.4.0", "9.0.0").
				str("cudaComputeCapability", "9.0")),
			want: want{devices: 1, cuda: "12.4.0", compute: "9.0", driver: "550.54.15",
				products: []string{h100Name}, driverMinors: []string{"550.54"}},
		},
		{
			name: "unreadable attributes are reported and ignored",
			devices: devices(gpuDevice("gpu-0", h100Name, "550.54.15", "12.4.0-rc.1", "9.0.0").
				attr("cudaComputeCapability", resourceapi.DeviceAttribute{IntValue: ptr.To[int64](9)}).
				str("driverVersion", "r550").
				attr("productName", resourceapi.DeviceAttribute{BoolValue: ptr.To(true)})),
			want: want{devices: 1, problems: []string{
				`gpu.nvidia.com/cudaDriverVersion="12.4.0-rc.1"`, `gpu.nvidia.com/cudaComputeCapability=9`,
				`gpu.nvidia.com/driverVersion="r550"`, `gpu.nvidia.com/productName=true`}},
		},
		{
			name:    "a type that is not a string is reported, and the device not read",
			devices: devices(h100s(1)[0].attr("type", resourceapi.DeviceAttribute{IntValue: ptr.To[int64](1)})),
			want:    want{problems: []string{"gpu.nvidia.com/type=1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			df := ReadDevices(tt.devices)
			var problems []string
			for _, p := range df.Problems {
				problems = append(problems, p.Attribute+"="+p.Value)
			}
			got := want{devices: df.Devices, cuda: df.CUDA.String(), compute: df.Compute.String(), driver: df.Driver.String(),
				products: df.Products, driverMinors: df.DriverMajorMinors, mig: df.MIG, problems: problems}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("facts (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDeviceAttributeErrorMessage(t *testing.T) {
	df := ReadDevices(devices(h100s(1)[0].version("cudaDriverVersion", "12.4.0-rc.1")))
	require.Len(t, df.Problems, 1)
	require.Equal(t, `device gpu-0 (driver gpu.nvidia.com, pool node): attribute gpu.nvidia.com/cudaDriverVersion="12.4.0-rc.1" `+
		`is a pre-release version, which ranks below its release and which gpu-gang does not compare; `+
		`want a version such as "12.4.0": the highest CUDA version the driver supports`, df.Problems[0].Error())
}

// Labels win where present; each fact no label gives is read from the
// devices, and says so.
func TestReadNodeDevices(t *testing.T) {
	mixed := devices(
		gpuDevice("gpu-0", h100Name, "550.54.15", "12.4.0", "9.0.0"),
		gpuDevice("gpu-1", a100Name, "535.104.5", "12.2.0", "8.0.0"))
	tests := []struct {
		name    string
		labels  map[string]string
		devices []capacity.Device
		want    NodeFacts // the fields compared below
	}{
		{
			name:    "no labels: every fact from the devices",
			devices: devices(h100s(8)...),
			want: NodeFacts{GPU: true, CUDA: mustParseVersion("12.4.0"), CUDALabel: "device attribute gpu.nvidia.com/cudaDriverVersion",
				Driver: mustParseVersion("550.54.15"), DriverLabel: "device attribute gpu.nvidia.com/driverVersion",
				Compute: mustParseVersion("9.0.0"), ComputeLabel: "device attribute gpu.nvidia.com/cudaComputeCapability", Product: h100Name},
		},
		{
			name:    "labels win, fact by fact",
			labels:  kv("nvidia.com/cuda.runtime-version.full", "12.2", "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
			devices: devices(h100s(8)...),
			want: NodeFacts{GPU: true, CUDA: mustParseVersion("12.2"), CUDALabel: "nvidia.com/cuda.runtime-version.full",
				Driver: mustParseVersion("550.54.15"), DriverLabel: "device attribute gpu.nvidia.com/driverVersion",
				Compute: mustParseVersion("9.0.0"), ComputeLabel: "device attribute gpu.nvidia.com/cudaComputeCapability", Product: "NVIDIA-H100-80GB-HBM3"},
		},
		{
			name:    "a mixed node: the lowest version, named so",
			devices: mixed,
			want: NodeFacts{GPU: true, CUDA: mustParseVersion("12.2.0"), CUDALabel: "device attribute gpu.nvidia.com/cudaDriverVersion, the lowest of the node's GPUs",
				Driver: mustParseVersion("535.104.5"), DriverLabel: "device attribute gpu.nvidia.com/driverVersion, the lowest of the node's GPUs",
				Compute: mustParseVersion("8.0.0"), ComputeLabel: "device attribute gpu.nvidia.com/cudaComputeCapability, the lowest of the node's GPUs",
				Product: a100Name + " | " + h100Name},
		},
		{
			name:    "only other drivers' devices: labels alone",
			labels:  kv("nvidia.com/gpu.present", "true"),
			devices: devices(h100s(1)[0].driver("rdma.example.com")),
			want:    NodeFacts{GPU: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ReadNodeDevices(tt.labels, tt.devices, nil)
			got := NodeFacts{GPU: f.GPU, CUDA: f.CUDA, CUDALabel: f.CUDALabel, Driver: f.Driver, DriverLabel: f.DriverLabel,
				Compute: f.Compute, ComputeLabel: f.ComputeLabel, Product: f.Product}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(Version{}, NodeFacts{})); diff != "" {
				t.Errorf("facts (-want,+got):\n%s", diff)
			}
			shared, _ := f.SharedGPUs()
			require.False(t, shared, "devices never make a node's GPUs shared")
		})
	}
	require.Equal(t, ReadNode(kv("nvidia.com/gpu.present", "true"), nil), ReadNodeDevices(kv("nvidia.com/gpu.present", "true"), nil, nil),
		"without devices, the labels' facts")
}

// The rules judge DRA nodes by their devices, and messages name the
// attribute read.
func TestAdmitsAndExplainFromDevices(t *testing.T) {
	nodes := []placement.Node{node("a-122", kv()), node("b-124", kv()), node("c-1210", kv()), node("d-none", kv())}
	byNode := map[string][]capacity.Device{
		"a-122":  devices(gpuDevice("gpu-0", h100Name, "535.104.5", "12.2.0", "9.0.0")),
		"b-124":  devices(h100s(2)...),
		"c-1210": devices(gpuDevice("gpu-0", h100Name, "580.65.6", "12.10.0", "9.0.0")),
	}
	fl := NewWithDevices(nodes, func(n string) []capacity.Device { return byNode[n] }, DefaultOptions())

	req := Requirements{MinCUDA: mustParseVersion("12.4")}
	require.Equal(t, []bool{false, true, true, false}, admitted(fl, req, Demand{DRA: true}), "12.10 is above 12.4")
	_, why := fl.Admits(0, req, Demand{DRA: true})
	require.Equal(t, "the node's driver supports CUDA 12.2.0 (device attribute gpu.nvidia.com/cudaDriverVersion), below the 12.4 the member needs", why.Reason)

	e := fl.Explain(Requirements{MinCUDA: mustParseVersion("13.0")}, Demand{DRA: true}, nil)
	require.Equal(t, "none of 4 nodes admits the member's GPU requirements: needs CUDA >= 13.0; the best in the cluster is 12.10.0 "+
		"(device attribute gpu.nvidia.com/cudaDriverVersion) on 1 of 3 GPU nodes; 1 node has no CUDA label or device attribute (unlabelledNodes: Skip)", e.Message)
}

// Uniform groups on DRA nodes: devices' productName and driverVersion stand
// in for the labels, a value read from devices never joins one read from a
// label, and a node whose devices disagree is in a group of its own kind.
func TestGroupKeysFromDevices(t *testing.T) {
	nodes := []placement.Node{
		node("gfd-h100", gfd("12.4", "550.54.15", "9.0", "nvidia.com/gpu.product", h100)),
		node("dra-h100-0", kv()),
		node("dra-h100-1", kv()),
		node("dra-h100-new-driver", kv()),
		node("dra-spelled-as-gfd", kv()),
		node("dra-mixed", kv()),
		node("dra-labelled-product", kv("nvidia.com/gpu.product", h100)),
		node("cpu", kv()),
	}
	byNode := map[string][]capacity.Device{
		"dra-h100-0":          devices(h100s(8)...),
		"dra-h100-1":          devices(gpuDevice("gpu-0", h100Name, "550.54.14", "12.4.0", "9.0.0")), // revision differs: same group
		"dra-h100-new-driver": devices(gpuDevice("gpu-0", h100Name, "550.127.8", "12.4.0", "9.0.0")),
		"dra-spelled-as-gfd":  devices(gpuDevice("gpu-0", h100, "550.54.15", "12.4.0", "9.0.0")),
		"dra-mixed": devices(
			gpuDevice("gpu-0", h100Name, "550.54.15", "12.4.0", "9.0.0"),
			gpuDevice("gpu-1", a100Name, "535.104.5", "12.2.0", "8.0.0")),
		"dra-labelled-product": devices(h100s(2)...),
	}
	fl := NewWithDevices(nodes, func(n string) []capacity.Device { return byNode[n] }, DefaultOptions())
	g := groupOf(fl, DefaultRequirements())
	want := [][]string{
		{"nvidia.com/gpu.product unset, driver unset, on-demand capacity", "cpu"},
		{"nvidia.com/gpu.product=" + h100 + ", driver 550.54, on-demand capacity", "gfd-h100"},
		{"nvidia.com/gpu.product=" + h100 + ", driver 550.54 (gpu.nvidia.com/driverVersion), on-demand capacity", "dra-labelled-product"},
		{"gpu.nvidia.com/productName=" + a100Name + " | " + h100Name + " (mixed), driver 535.104 | 550.54 (gpu.nvidia.com/driverVersion, mixed), on-demand capacity", "dra-mixed"},
		{"gpu.nvidia.com/productName=" + h100Name + ", driver 550.127 (gpu.nvidia.com/driverVersion), on-demand capacity", "dra-h100-new-driver"},
		{"gpu.nvidia.com/productName=" + h100Name + ", driver 550.54 (gpu.nvidia.com/driverVersion), on-demand capacity", "dra-h100-0", "dra-h100-1"},
		{"gpu.nvidia.com/productName=" + h100 + ", driver 550.54 (gpu.nvidia.com/driverVersion), on-demand capacity", "dra-spelled-as-gfd"},
	}
	if diff := cmp.Diff(want, groupsByName(t, nodes, g)); diff != "" {
		t.Errorf("groups (-want,+got):\n%s", diff)
	}
	for _, grp := range g.Groups {
		require.Equal(t, grp.Key.String() != want[0][0] && grp.Key.String() != want[1][0], grp.Key.FromDevices(), "group %s", grp.Key)
	}
}
