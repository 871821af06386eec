package metrics

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-gang/gpu-gang/pkg/apis/scheduling"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
)

// RailSummary judges, on a rail-optimized fabric, the devices the
// scheduler allocated to gang members' claims, read from the claims'
// allocations (ClaimCounter.Allocations) and the rails of the
// ResourceSlices (RailMap), not from the scheduler.
//
// A member's k-th GPU is its k-th allocated GPU in GPU index order (PCI bus
// order); a GPU's rail is the rail of the NIC on its PCIe root, and a NIC's
// rail its position among its node's NICs in PCI address order. Two members
// of a gang in one scalable unit (a leaf: rail k of its nodes is one
// switch) are misaligned when, for some k, their k-th GPUs are on
// different rails (or they hold different numbers of GPUs). Members in
// different units reach each other through the spine whatever their rails;
// their pairs are counted apart.
type RailSummary struct {
	// Gangs counts the gangs judged: at least two members, every member
	// bound by the end and its claim's allocation seen.
	Gangs int `json:"gangs"`
	// MisalignedGangs counts those with at least one misaligned pair.
	MisalignedGangs int `json:"misalignedGangs"`
	// MemberPairs counts the pairs of members of one gang in one unit,
	// over the gangs judged; MisalignedPairs those misaligned.
	MemberPairs     int `json:"memberPairs"`
	MisalignedPairs int `json:"misalignedPairs"`
	// CrossUnitPairs counts the pairs of members of one gang in different
	// units; CrossUnitRailsDiffer those whose k-th GPUs sit on rails of
	// different numbers for some k (which costs nothing on a fabric whose
	// spines join every rail switch, but matters where the spines are
	// split by rail).
	CrossUnitPairs       int `json:"crossUnitPairs"`
	CrossUnitRailsDiffer int `json:"crossUnitRailsDiffer"`
	// MembersWithNICs counts members of the gangs judged that got NICs.
	MembersWithNICs int `json:"membersWithNICs"`
	// GPUNICPairs counts their GPUs paired with a NIC: request gpu-k with
	// request nic-k, or else the k-th GPU with the k-th NIC by rail;
	// CrossRootPairs those whose PCIe roots differ (0 when the allocator
	// honoured the claims' constraints).
	GPUNICPairs    int `json:"gpuNICPairs"`
	CrossRootPairs int `json:"crossRootPairs"`
	// NICRailMismatches counts members whose NICs' rails are not their
	// GPUs' rails.
	NICRailMismatches int `json:"nicRailMismatches"`
}

// RailMap knows the rail and PCIe root of every device on a PCIe root
// that a set of ResourceSlices publishes. It is built once and only read.
type RailMap struct {
	devices map[deviceKey]railedDevice
}

// deviceKey names a device as an allocation result does.
type deviceKey struct{ driver, pool, device string }

type railedDevice struct {
	// rail is -1 when no NIC of the node shares the device's root.
	rail int
	root string
	nic  bool
	// index orders a node's devices of one kind: a GPU's position in PCI
	// bus order (its index), a NIC's rail.
	index int
}

// NewRailMap reads the rails of the devices the slices publish. Per pool
// (node): a NIC is a device whose rdma attribute (in its driver's domain)
// is true; its rail is its position among the pool's NICs in PCI address
// order (pciAddress, or the standard pciBusID). A GPU of gpu.nvidia.com
// takes the rail of the NIC on its PCIe root. Slices of several drivers
// with the same pool name (dranet's and NVIDIA's both name theirs after
// the node) make one node.
func NewRailMap(list []*resourceapi.ResourceSlice) *RailMap {
	type device struct {
		key  deviceKey
		dev  *resourceapi.Device
		addr string
	}
	pools := map[string][]device{}
	for _, s := range list {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			addr, _ := stringAttr(d, s.Spec.Driver, "pciAddress")
			if addr == "" {
				addr, _ = stringAttr(d, s.Spec.Driver, scheduling.DeviceAttributePCIBusID)
			}
			pools[s.Spec.Pool.Name] = append(pools[s.Spec.Pool.Name], device{deviceKey{s.Spec.Driver, s.Spec.Pool.Name, d.Name}, d, addr})
		}
	}
	m := &RailMap{devices: map[deviceKey]railedDevice{}}
	byAddress := func(a, b device) int {
		return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(a.key.driver, b.key.driver), cmp.Compare(a.key.device, b.key.device))
	}
	for _, pool := range slices.Sorted(maps.Keys(pools)) {
		var nics, gpus []device
		for _, d := range pools[pool] {
			switch {
			case boolAttr(d.dev, d.key.driver, "rdma"):
				nics = append(nics, d)
			case d.key.driver == scheduling.DRADriverGPU:
				gpus = append(gpus, d)
			}
		}
		slices.SortFunc(nics, byAddress)
		slices.SortFunc(gpus, byAddress)
		railOfRoot := map[string]int{}
		for rail, d := range nics {
			root, _ := stringAttr(d.dev, d.key.driver, fabric.AttributePCIeRoot)
			if _, taken := railOfRoot[root]; !taken && root != "" {
				railOfRoot[root] = rail
			}
			m.devices[d.key] = railedDevice{rail: rail, root: root, nic: true, index: rail}
		}
		for i, d := range gpus {
			root, _ := stringAttr(d.dev, d.key.driver, fabric.AttributePCIeRoot)
			rail, ok := railOfRoot[root]
			if !ok {
				rail = -1
			}
			m.devices[d.key] = railedDevice{rail: rail, root: root, index: i}
		}
	}
	return m
}

// CountRails judges the allocations of the members of gangs (as the
// tracker reports them) against the rails of rm, unitOf naming the unit of
// a node (a pool: NVIDIA's and dranet's pools are named after their node);
// see RailSummary. It also writes each judged gang's members' rails into
// gangs (Gang.Rails).
func CountRails(rm *RailMap, allocs []PodAllocation, gangs []Gang, unitOf func(node string) string) *RailSummary {
	byJob := map[string][]PodAllocation{}
	for _, a := range allocs {
		byJob[a.Job] = append(byJob[a.Job], a)
	}
	s := &RailSummary{}
	for gi := range gangs {
		g := &gangs[gi]
		members := byJob[g.Name]
		if g.AllBound == nil || g.Pods < 2 || len(members) != g.Pods {
			continue
		}
		s.Gangs++
		seqs := make([][]int, len(members))
		units := make([]string, len(members))
		g.Rails = make([]string, len(members))
		for i, m := range members {
			gpus, nics := rm.split(m.Results)
			if len(m.Results) > 0 {
				units[i] = unitOf(m.Results[0].Pool)
			}
			seqs[i] = make([]int, len(gpus))
			rails := make([]string, len(gpus))
			for k, d := range gpus {
				seqs[i][k] = d.rail
				rails[k] = strconv.Itoa(d.rail)
			}
			g.Rails[i] = strings.Join(rails, ",")
			if len(nics) == 0 {
				continue
			}
			s.MembersWithNICs++
			for _, p := range rm.pairs(m.Results, gpus, nics) {
				s.GPUNICPairs++
				if p[0].root != p[1].root {
					s.CrossRootPairs++
				}
			}
			if !slices.Equal(railSet(gpus), railSet(nics)) {
				s.NICRailMismatches++
			}
		}
		misaligned := 0
		for a := range seqs {
			for b := a + 1; b < len(seqs); b++ {
				differ := !slices.Equal(seqs[a], seqs[b])
				if units[a] != units[b] {
					s.CrossUnitPairs++
					if differ {
						s.CrossUnitRailsDiffer++
					}
					continue
				}
				s.MemberPairs++
				if differ {
					misaligned++
				}
			}
		}
		s.MisalignedPairs += misaligned
		if misaligned > 0 {
			s.MisalignedGangs++
			g.RailMisaligned = true
		}
	}
	return s
}

// split returns the GPUs and NICs among results that rm knows, each in
// its order (GPU index, rail).
func (rm *RailMap) split(results []resourceapi.DeviceRequestAllocationResult) (gpus, nics []railedDevice) {
	for _, r := range results {
		d, ok := rm.devices[deviceKey{r.Driver, r.Pool, r.Device}]
		switch {
		case !ok:
		case d.nic:
			nics = append(nics, d)
		case r.Driver == scheduling.DRADriverGPU:
			gpus = append(gpus, d)
		}
	}
	byIndex := func(a, b railedDevice) int { return cmp.Compare(a.index, b.index) }
	slices.SortFunc(gpus, byIndex)
	slices.SortFunc(nics, byIndex)
	return gpus, nics
}

// pairs pairs a member's GPUs with its NICs: the devices of requests gpu-k
// and nic-k when every GPU and NIC came from such a request, else the k-th
// GPU with the k-th NIC in order.
func (rm *RailMap) pairs(results []resourceapi.DeviceRequestAllocationResult, gpus, nics []railedDevice) [][2]railedDevice {
	byPair := map[int]*[2]*railedDevice{}
	named := 0
	for _, r := range results {
		d, ok := rm.devices[deviceKey{r.Driver, r.Pool, r.Device}]
		if !ok {
			continue
		}
		prefix, slot := "gpu-", 0
		if d.nic {
			prefix, slot = "nic-", 1
		}
		k, err := strconv.Atoi(strings.TrimPrefix(r.Request, prefix))
		if !strings.HasPrefix(r.Request, prefix) || err != nil {
			continue
		}
		if byPair[k] == nil {
			byPair[k] = &[2]*railedDevice{}
		}
		byPair[k][slot] = &d
		named++
	}
	var out [][2]railedDevice
	if named == len(gpus)+len(nics) {
		for _, k := range slices.Sorted(maps.Keys(byPair)) {
			if p := byPair[k]; p[0] != nil && p[1] != nil {
				out = append(out, [2]railedDevice{*p[0], *p[1]})
			}
		}
		return out
	}
	for k := range min(len(gpus), len(nics)) {
		out = append(out, [2]railedDevice{gpus[k], nics[k]})
	}
	return out
}

// railSet lists the devices' rails, sorted.
func railSet(devices []railedDevice) []int {
	out := make([]int, len(devices))
	for i, d := range devices {
		out[i] = d.rail
	}
	slices.Sort(out)
	return out
}

// attr finds a device attribute by its name in the driver's domain,
// written with or without that domain, or by a fully qualified name.
func attr(d *resourceapi.Device, driver, name string) (resourceapi.DeviceAttribute, bool) {
	if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok {
		return a, true
	}
	a, ok := d.Attributes[resourceapi.QualifiedName(driver+"/"+name)]
	return a, ok
}

func stringAttr(d *resourceapi.Device, driver, name string) (string, bool) {
	if a, ok := attr(d, driver, name); ok && a.StringValue != nil {
		return *a.StringValue, true
	}
	return "", false
}

func boolAttr(d *resourceapi.Device, driver, name string) bool {
	a, ok := attr(d, driver, name)
	return ok && a.BoolValue != nil && *a.BoolValue
}
