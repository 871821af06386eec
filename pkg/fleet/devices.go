package fleet

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/capacity"
)

// DeviceFacts is what the devices of NVIDIA's GPU DRA driver
// (scheduling.DRADriverGPU) on one node say about its GPUs: whole GPUs and
// MIG slices (device types "gpu" and "mig"). Devices of other types or
// drivers are not read. ReadDevices fills it.
//
// A node's devices may disagree: GPUs of two products, or a driver
// upgraded on some of them. Each version is then the lowest one, since a
// pod may be handed any of the devices; Products and DriverMajorMinors list
// every value, so that a uniform gang never takes a mixed node for a pure
// one. A fact is known only when every device says it: one device that does
// not, or says it in a form that cannot be read, leaves the node saying
// nothing, as a missing label does.
type DeviceFacts struct {
	// Devices counts the GPU devices read.
	Devices int
	// CUDA is the lowest cudaDriverVersion: the highest CUDA version the
	// driver supports. Zero when some device does not say.
	CUDA Version
	// Compute is the lowest cudaComputeCapability; zero when some device
	// does not say.
	Compute Version
	// Driver is the lowest driverVersion; zero when some device does not
	// say.
	Driver Version
	// Products are the distinct productNames, sorted; nil when some device
	// does not say.
	Products []string
	// DriverMajorMinors are the distinct major.minor of driverVersion, in
	// version order; nil when some device does not say.
	DriverMajorMinors []string
	// MIG is true when some device is a MIG slice.
	MIG bool
	// Problems lists the attributes that are set but cannot be read. Each
	// is ignored, as if it were missing.
	Problems []*DeviceAttributeError
	// mixed marks the versions on which the devices disagree.
	mixed factSet
}

// factSet marks facts of NodeFacts.
type factSet uint8

const (
	factCUDA factSet = 1 << iota
	factCompute
	factDriver
	factProduct
)

func (s factSet) has(f factSet) bool { return s&f != 0 }

// DeviceAttributeError says that a device attribute holds a value gpu-gang
// cannot read. The attribute is then ignored, as if it were missing; the
// plugin turns the error into an Event on the device's node, naming the
// ResourceSlice, so that whoever runs the DRA driver can fix it.
type DeviceAttributeError struct {
	// Driver, Pool and Device name the device.
	Driver, Pool, Device string
	// Attribute is the attribute's name with its domain, such as
	// gpu.nvidia.com/cudaDriverVersion.
	Attribute string
	// Value is the attribute's value, as written for people.
	Value string
	// Reason says what is wrong with it.
	Reason string
	// Want describes the accepted values.
	Want string
}

func (e *DeviceAttributeError) Error() string {
	return fmt.Sprintf("device %s (driver %s, pool %s): attribute %s=%s %s; want %s", e.Device, e.Driver, e.Pool, e.Attribute, e.Value, e.Reason, e.Want)
}

// AttributeName is the name of a device attribute of the GPU driver with
// its domain, as CEL and messages spell it: gpu.nvidia.com/cudaDriverVersion.
func AttributeName(attr string) string { return scheduling.DRADriverGPU + "/" + attr }

// attributeSource names where a fact read from devices came from, in the
// style of the label names NodeFacts keeps for facts read from labels.
func attributeSource(attr string, mixed bool) string {
	s := "device attribute " + AttributeName(attr)
	if mixed {
		s += ", the lowest of the node's GPUs"
	}
	return s
}

// What each version attribute holds, for problems.
const (
	wantCUDAAttribute    = `a version such as "12.4.0": the highest CUDA version the driver supports`
	wantComputeAttribute = `a version such as "9.0.0"`
	wantDriverAttribute  = `a version such as "550.54.15"`
)

// ReadDevices reads what a node's GPU devices say. devices are the node's
// devices of every driver, in the inventory's order (pkg/capacity's
// NodeDevices), which makes the outcome deterministic. It never fails: an
// attribute it cannot read is reported in Problems and otherwise ignored.
func ReadDevices(devices []capacity.Device) DeviceFacts {
	var df DeviceFacts
	var cuda, compute, driver lowest
	var products, drivers []string
	productsKnown, driversKnown := true, true
	for i := range devices {
		d := &devices[i]
		if d.Driver != scheduling.DRADriverGPU {
			continue
		}
		typ, _ := df.readString(d, scheduling.DeviceAttributeType, quoteList(scheduling.DeviceTypeGPU, scheduling.DeviceTypeMIG))
		if typ != scheduling.DeviceTypeGPU && typ != scheduling.DeviceTypeMIG {
			continue // another kind of device (or none said): not read
		}
		df.Devices++
		df.MIG = df.MIG || typ == scheduling.DeviceTypeMIG
		cuda.add(df.readVersion(d, scheduling.DeviceAttributeCUDADriverVersion, wantCUDAAttribute))
		compute.add(df.readVersion(d, scheduling.DeviceAttributeCUDAComputeCapability, wantComputeAttribute))
		v := df.readVersion(d, scheduling.DeviceAttributeDriverVersion, wantDriverAttribute)
		driver.add(v)
		if v.IsZero() {
			driversKnown = false
		} else if mm := majorMinor(v); !slices.Contains(drivers, mm) {
			drivers = append(drivers, mm)
		}
		if p, ok := df.readString(d, scheduling.DeviceAttributeProductName, "the GPU's product name"); !ok {
			productsKnown = false
		} else if !slices.Contains(products, p) {
			products = append(products, p)
		}
	}
	df.CUDA = cuda.result(&df.mixed, factCUDA)
	df.Compute = compute.result(&df.mixed, factCompute)
	df.Driver = driver.result(&df.mixed, factDriver)
	if productsKnown && len(products) > 0 {
		slices.Sort(products)
		df.Products = products
	}
	if driversKnown && len(drivers) > 0 {
		slices.SortFunc(drivers, func(a, b string) int {
			va, _ := ParseVersion(a)
			vb, _ := ParseVersion(b)
			return cmp.Or(va.Compare(vb), strings.Compare(a, b))
		})
		df.DriverMajorMinors = drivers
	}
	return df
}

// majorMinor is a version's major.minor, written as numbers, so that
// "550.054" and "550.54" are one driver.
func majorMinor(v Version) string { return fmt.Sprintf("%d.%d", v.Part(0), v.Part(1)) }

// lowest folds the versions of a node's devices into the lowest one.
type lowest struct {
	v Version
	// missing is set when some device said none; distinct when two
	// devices differ.
	missing, distinct bool
}

func (l *lowest) add(v Version) {
	switch {
	case v.IsZero():
		l.missing = true
	case l.v.IsZero():
		l.v = v
	case v.Compare(l.v) != 0:
		l.distinct = true
		if v.Compare(l.v) < 0 {
			l.v = v
		}
	}
}

// result is the lowest version, zero when some device said none; mixed
// gets f when devices disagree.
func (l *lowest) result(mixed *factSet, f factSet) Version {
	if l.missing {
		return Version{}
	}
	if l.distinct {
		*mixed |= f
	}
	return l.v
}

// attribute finds a device attribute of the GPU driver by name. Kubernetes
// lets a driver write its own attributes with or without its domain; as
// its validation does, the name with the domain wins when a device has
// both.
func attribute(d *capacity.Device, name string) (resourceapi.DeviceAttribute, bool) {
	if a, ok := d.Attributes[resourceapi.QualifiedName(AttributeName(name))]; ok {
		return a, true
	}
	a, ok := d.Attributes[resourceapi.QualifiedName(name)]
	return a, ok
}

// readString reads a string attribute; false when it is missing or is not
// a string (a problem).
func (df *DeviceFacts) readString(d *capacity.Device, name, want string) (string, bool) {
	a, ok := attribute(d, name)
	if !ok {
		return "", false
	}
	if a.StringValue == nil {
		df.problem(d, name, a, "is not a string", want)
		return "", false
	}
	return *a.StringValue, true
}

// readVersion reads a version attribute; zero when it is missing or cannot
// be read (a problem). The API holds versions as semantic versions
// ("12.4.0"); a string that is a version is read too. Build metadata has no
// bearing on order and is dropped; a pre-release ranks below its release,
// which a Version cannot say, so it is not read.
func (df *DeviceFacts) readVersion(d *capacity.Device, name, want string) Version {
	a, ok := attribute(d, name)
	if !ok {
		return Version{}
	}
	var raw string
	switch {
	case a.VersionValue != nil:
		raw, _, _ = strings.Cut(*a.VersionValue, "+")
		if strings.Contains(raw, "-") {
			df.problem(d, name, a, "is a pre-release version, which ranks below its release and which gpu-gang does not compare", want)
			return Version{}
		}
	case a.StringValue != nil:
		raw = *a.StringValue
	default:
		df.problem(d, name, a, "is not a version", want)
		return Version{}
	}
	v, err := ParseVersion(raw)
	if err != nil {
		df.problem(d, name, a, "is not a version: it "+err.Error(), want)
		return Version{}
	}
	return v
}

func (df *DeviceFacts) problem(d *capacity.Device, name string, a resourceapi.DeviceAttribute, reason, want string) {
	df.Problems = append(df.Problems, &DeviceAttributeError{
		Driver: d.Driver, Pool: d.Pool, Device: d.Name, Attribute: AttributeName(name),
		Value: attributeValue(a), Reason: reason, Want: want,
	})
}

// attributeValue writes an attribute's value for people.
func attributeValue(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return quote(*a.StringValue)
	case a.VersionValue != nil:
		return quote(*a.VersionValue)
	case a.IntValue != nil:
		return fmt.Sprint(*a.IntValue)
	case a.BoolValue != nil:
		return fmt.Sprint(*a.BoolValue)
	}
	return "(a list)"
}

// ReadNodeDevices reads a node's GPU facts from its labels and, for each
// fact that no label gives, from its devices (ReadDevices): labels win
// where present. GPU feature discovery writes them from the same NVML
// queries the DRA driver makes, so on a node that has both they agree;
// where they do not, the label is what the node's operator set or sees,
// and can correct. devices are the node's devices, nil for none.
//
// Sharing is the node's only where labels say so: on a DRA node a claim
// chooses its GPUs and whether to share them, so the devices say nothing
// about sharing, and a pod that asks for nvidia.com/gpu there gets whole
// GPUs of the DeviceClass that serves it.
func ReadNodeDevices(labels map[string]string, devices []capacity.Device, opts *Options) NodeFacts {
	f := ReadNode(labels, opts)
	if len(devices) == 0 {
		return f
	}
	df := ReadDevices(devices)
	if df.Devices == 0 && len(df.Problems) == 0 {
		return f
	}
	f.Devices = &df
	f.GPU = f.GPU || df.Devices > 0
	f.MIG = f.MIG || df.MIG
	if !f.HasCUDA() && !df.CUDA.IsZero() {
		f.CUDA, f.CUDALabel = df.CUDA, attributeSource(scheduling.DeviceAttributeCUDADriverVersion, df.mixed.has(factCUDA))
		f.fromDevices |= factCUDA
	}
	if !f.HasCompute() && !df.Compute.IsZero() {
		f.Compute, f.ComputeLabel = df.Compute, attributeSource(scheduling.DeviceAttributeCUDAComputeCapability, df.mixed.has(factCompute))
		f.fromDevices |= factCompute
	}
	if f.Driver.IsZero() && !df.Driver.IsZero() {
		f.Driver, f.DriverLabel = df.Driver, attributeSource(scheduling.DeviceAttributeDriverVersion, df.mixed.has(factDriver))
		f.fromDevices |= factDriver
	}
	if f.Product == "" && df.Products != nil {
		f.Product = strings.Join(df.Products, " | ")
		f.fromDevices |= factProduct
	}
	return f
}
