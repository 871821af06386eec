package capacity

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// A rail-optimized fabric cables NIC k of every node of a scalable unit to
// leaf switch k, "rail k": traffic between the k-th GPUs of two nodes
// crosses one switch, and a GPU reaches the network well only through the
// NIC on its own PCIe root. The model reads a node's rails from the devices
// its ResourceSlices publish:
//
//   - a NIC is a device with a boolean attribute "rdma" that is true
//     (dranet's dra.net/rdma, or the same name in another driver's domain);
//   - the NIC's rail is its position among the node's NICs in PCI address
//     order (attribute pciBusID or pciAddress), which is how such fabrics
//     are cabled: rail k is the k-th NIC; unless the scheduler is
//     configured with attributes that name a NIC's rail (a rail index, the
//     NIC's subnet) and every NIC of the node carries one: then rails are
//     those values, numbered in their order over the whole cluster;
//   - any other device on a PCIe root (resource.kubernetes.io/pcieRoot)
//     takes the rail of the NIC on the same root, the nearest by PCI bus
//     when several share it;
//   - on a node without NICs, a device takes its position among its
//     driver's devices on PCIe roots, in PCI address order: GPU k is on
//     rail k.
//
// A device on no PCIe root has no rail.

// MaxRails bounds the rails of one node the model tells apart.
const MaxRails = 64

// RailSet is a set of rails: bit r stands for rail r.
type RailSet uint64

// Has reports whether rail r is in the set.
func (s RailSet) Has(r int) bool { return r >= 0 && r < MaxRails && s&(1<<r) != 0 }

// Len is how many rails the set holds.
func (s RailSet) Len() int {
	n := 0
	for x := s; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// Contains reports whether every rail of o is in s.
func (s RailSet) Contains(o RailSet) bool { return s&o == o }

// Rails lists the set's rails in order.
func (s RailSet) Rails() []int {
	var out []int
	for r := range MaxRails {
		if s.Has(r) {
			out = append(out, r)
		}
	}
	return out
}

// String writes the set as "0-3,6" for people.
func (s RailSet) String() string {
	var parts []string
	rails := s.Rails()
	for i := 0; i < len(rails); {
		j := i
		for j+1 < len(rails) && rails[j+1] == rails[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, strconv.Itoa(rails[i])+"-"+strconv.Itoa(rails[j]))
		} else {
			parts = append(parts, strconv.Itoa(rails[i]))
		}
		i = j + 1
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// PCIeRootAttribute is the standard attribute naming a device's PCIe root.
const PCIeRootAttribute resourceapi.QualifiedName = "resource.kubernetes.io/pcieRoot"

// nodeRails are the rails of one node's devices, read once per inventory.
type nodeRails struct {
	// of[i] is the rail of device position i, -1 for none.
	of []int8
	// nics are the positions of the node's NICs.
	nics Bits
	// count is how many rails the node has.
	count int
}

// pciDevice is a device of a node on the PCI bus: its position, address
// and root.
type pciDevice struct {
	pos  int
	addr pciAddress
	root string
}

// railNames number the configured rail names over the cluster.
type railNames struct {
	attrs []resourceapi.QualifiedName
	ids   map[railName]int
}

// railName is the value of a configured rail attribute.
type railName struct {
	isInt bool
	i     int64
	s     string
}

func compareRailNames(a, b railName) int {
	if a.isInt != b.isInt {
		if a.isInt {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.i, b.i), strings.Compare(a.s, b.s))
}

// railNameOf returns the first of attrs d carries, as a rail's name.
func railNameOf(d *Device, attrs []resourceapi.QualifiedName) (railName, bool) {
	for _, a := range attrs {
		v, ok := d.Attributes[a]
		switch {
		case !ok:
			continue
		case v.IntValue != nil:
			return railName{isInt: true, i: *v.IntValue}, true
		case v.StringValue != nil:
			return railName{s: *v.StringValue}, true
		case v.VersionValue != nil:
			return railName{s: *v.VersionValue}, true
		}
	}
	return railName{}, false
}

// namedRails numbers the rail names the NICs of nodes carry, in their
// order, so that a rail is the same on every node; nil without attributes
// or when there are more names than MaxRails.
func namedRails(nodes map[string]*NodeDevices, attrs []resourceapi.QualifiedName) *railNames {
	if len(attrs) == 0 {
		return nil
	}
	seen := map[railName]bool{}
	var names []railName
	for _, nd := range nodes {
		for i := range nd.Devices {
			d := &nd.Devices[i]
			if !isRDMA(d) {
				continue
			}
			if n, ok := railNameOf(d, attrs); ok && !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 || len(names) > MaxRails {
		return nil
	}
	slices.SortFunc(names, compareRailNames)
	out := &railNames{attrs: attrs, ids: make(map[railName]int, len(names))}
	for k, n := range names {
		out.ids[n] = k
	}
	return out
}

// readRails assigns rails to nd's devices (see the package's rail rules);
// named numbers configured rail names (namedRails).
func readRails(nd *NodeDevices, named *railNames) nodeRails {
	out := nodeRails{of: make([]int8, len(nd.Devices))}
	for i := range out.of {
		out.of[i] = -1
	}
	var nics, others []pciDevice
	for i := range nd.Devices {
		d := &nd.Devices[i]
		root, onRoot := stringAttribute(d, PCIeRootAttribute)
		addr := pciAddressOf(d)
		switch {
		case isRDMA(d):
			nics = append(nics, pciDevice{i, addr, root})
			out.nics.set(i)
		case onRoot:
			others = append(others, pciDevice{i, addr, root})
		}
	}
	byAddress := func(a, b pciDevice) int {
		return cmp.Or(a.addr.compare(b.addr), cmp.Compare(a.pos, b.pos))
	}
	if len(nics) > 0 {
		slices.SortFunc(nics, byAddress)
		nics = nics[:min(len(nics), MaxRails)]
		rail := make([]int, len(nics))
		for k := range nics {
			rail[k] = k
		}
		if byName, ok := nicRailsByName(nd, nics, named); ok {
			rail = byName
		}
		for k, n := range nics {
			out.of[n.pos] = int8(rail[k])
			out.count = max(out.count, rail[k]+1)
		}
		for _, o := range others {
			best, bestDist := -1, uint64(0)
			for k, n := range nics {
				if n.root == "" || n.root != o.root {
					continue
				}
				if dist := o.addr.distance(n.addr); best < 0 || dist < bestDist {
					best, bestDist = rail[k], dist
				}
			}
			if best >= 0 {
				out.of[o.pos] = int8(best)
			}
		}
		return out
	}
	// No NICs: each driver's devices on PCIe roots in PCI address order.
	slices.SortFunc(others, func(a, b pciDevice) int {
		return cmp.Or(strings.Compare(nd.Devices[a.pos].Driver, nd.Devices[b.pos].Driver), byAddress(a, b))
	})
	k, driver := 0, ""
	for _, o := range others {
		if d := nd.Devices[o.pos].Driver; d != driver {
			k, driver = 0, d
		}
		if k < MaxRails {
			out.of[o.pos] = int8(k)
			out.count = max(out.count, k+1)
		}
		k++
	}
	return out
}

// isRDMA reports whether d says it is an RDMA NIC: a boolean attribute
// "rdma" that is true, in its driver's domain or another's.
func isRDMA(d *Device) bool {
	for name, a := range d.Attributes {
		if a.BoolValue != nil && *a.BoolValue && attributeID(name) == "rdma" {
			return true
		}
	}
	return false
}

// attributeID is a qualified attribute name without its domain.
func attributeID(name resourceapi.QualifiedName) string {
	s := string(name)
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// stringAttribute returns d's string attribute name, given in full or as
// an unqualified name of d's driver.
func stringAttribute(d *Device, name resourceapi.QualifiedName) (string, bool) {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue, true
	}
	return "", false
}

// pciAddressNames are the attributes a device's PCI address is read from,
// in order: the standard one, then the drivers' own.
var pciAddressNames = []string{"resource.kubernetes.io/pciBusID", "pciBusID", "pciAddress"}

// pciAddress is a PCI address "domain:bus:device.function" as numbers;
// unknown is sorted last.
type pciAddress struct {
	known                         bool
	domain, bus, device, function uint64
	raw                           string
}

func pciAddressOf(d *Device) pciAddress {
	for _, n := range pciAddressNames {
		var v string
		var ok bool
		if strings.Contains(n, "/") {
			v, ok = stringAttribute(d, resourceapi.QualifiedName(n))
		} else {
			v, ok = stringAttribute(d, resourceapi.QualifiedName(d.Driver+"/"+n))
			if !ok {
				v, ok = stringAttribute(d, resourceapi.QualifiedName(n))
			}
		}
		if ok {
			return parsePCIAddress(v)
		}
	}
	return pciAddress{}
}

// parsePCIAddress reads "0000:1b:00.0" (or "1b:00.0"); what it cannot
// read sorts by its text after every address it can.
func parsePCIAddress(s string) pciAddress {
	out := pciAddress{raw: s}
	parts := strings.Split(s, ":")
	if len(parts) == 2 {
		parts = append([]string{"0"}, parts...)
	}
	if len(parts) != 3 {
		return out
	}
	devFn := strings.SplitN(parts[2], ".", 2)
	var err error
	if out.domain, err = strconv.ParseUint(parts[0], 16, 32); err != nil {
		return pciAddress{raw: s}
	}
	if out.bus, err = strconv.ParseUint(parts[1], 16, 16); err != nil {
		return pciAddress{raw: s}
	}
	if out.device, err = strconv.ParseUint(devFn[0], 16, 16); err != nil {
		return pciAddress{raw: s}
	}
	if len(devFn) == 2 {
		if out.function, err = strconv.ParseUint(devFn[1], 16, 8); err != nil {
			return pciAddress{raw: s}
		}
	}
	out.known = true
	return out
}

func (a pciAddress) compare(b pciAddress) int {
	if a.known != b.known {
		if a.known {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.domain, b.domain), cmp.Compare(a.bus, b.bus), cmp.Compare(a.device, b.device),
		cmp.Compare(a.function, b.function), strings.Compare(a.raw, b.raw))
}

// distance is how far apart two addresses are on the PCI bus: nearer
// devices share more of the tree below their root.
func (a pciAddress) distance(b pciAddress) uint64 {
	if !a.known || !b.known || a.domain != b.domain {
		return 1 << 32
	}
	if a.bus > b.bus {
		return a.bus - b.bus
	}
	return b.bus - a.bus
}

// RailCounts counts devices per rail.
type RailCounts [MaxRails]uint8

// Free is the set of rails with at least one device counted.
func (c *RailCounts) Free() RailSet {
	var s RailSet
	for r, n := range c {
		if n > 0 {
			s |= 1 << r
		}
	}
	return s
}

// Slots is how many times every rail of s can give one device: the
// fewest counted on any of them.
func (c *RailCounts) Slots(s RailSet) int {
	if s == 0 {
		return 0
	}
	n := 255
	for x := s; x != 0; x &= x - 1 {
		r := trailingZeros(x)
		n = min(n, int(c[r]))
	}
	return n
}

func trailingZeros(x RailSet) int {
	n := 0
	for x&1 == 0 {
		x >>= 1
		n++
	}
	return n
}

// NodeRails is what a pass reads of one node's rails for one device
// dimension.
type NodeRails struct {
	// Free counts the dimension's free devices per rail; Total counts all
	// of them.
	Free, Total RailCounts
	// NICs is set when the dimension's devices are NICs.
	NICs bool
	// Rails is how many rails the node has; 0 when it has none the model
	// can read, or the dimension's devices have none.
	Rails int
}

// Rails reads node's rails for device dimension dim (a kind a claim asks
// for): per rail, how many of its devices are free and how many there are.
// ok is false when dim is not a plain kind dimension or none of its
// devices on the node sits on a rail. The matcher keeps each node's
// reading (railsMemo): a node is read again only when its allocated
// devices differ from those its reading counted.
func (d *Devices) Rails(ctx context.Context, node string, dim v1.ResourceName) (NodeRails, bool) {
	k, isKind := d.registry.Kind(dim)
	if !isKind {
		return NodeRails{}, false
	}
	inv := d.matcher.inv
	nd := inv.Node(node)
	if nd == nil {
		return NodeRails{}, false
	}
	if out, ok, kept := d.matcher.rails.lookup(d, nd, dim); kept {
		return out, ok
	}
	out, ok := d.readRails(ctx, nd, k)
	d.matcher.rails.store(d, nd, len(inv.nodes), dim, out, ok)
	return out, ok
}

// readRails counts nd's devices of kind k per rail, free and in all.
func (d *Devices) readRails(ctx context.Context, nd *NodeDevices, k *Kind) (out NodeRails, ok bool) {
	rails := &nd.rails
	b := d.matcher.On(ctx, k, nd.Node)
	alloc := d.allocated[nd.Node]
	for i := range nd.Devices {
		if !b.Has(i) {
			continue
		}
		r := rails.of[i]
		if r < 0 {
			continue
		}
		ok = true
		out.NICs = out.NICs || rails.nics.Has(i)
		if out.Total[r] < 255 {
			out.Total[r]++
		}
		if !alloc.Has(i) && out.Free[r] < 255 {
			out.Free[r]++
		}
	}
	out.Rails = rails.count
	return out, ok
}

// RailsAt counts, per rail, node's devices of dimension dim at positions
// at (the devices some pods hold, Inventory.Positions). ok is false when
// dim is not a plain kind dimension or node is unknown.
func (d *Devices) RailsAt(ctx context.Context, node string, dim v1.ResourceName, at Bits) (out RailCounts, ok bool) {
	k, isKind := d.registry.Kind(dim)
	nd := d.matcher.inv.Node(node)
	if !isKind || nd == nil {
		return out, false
	}
	b := d.matcher.On(ctx, k, node)
	for i := range nd.Devices {
		if r := nd.rails.of[i]; r >= 0 && at.Has(i) && b.Has(i) && out[r] < 255 {
			out[r]++
		}
	}
	return out, true
}

// RailDevices returns the devices of dimension dim on node that are free
// in d and sit on rail r, in position order.
func (d *Devices) RailDevices(ctx context.Context, node string, dim v1.ResourceName, r int) []Device {
	k, isKind := d.registry.Kind(dim)
	nd := d.matcher.inv.Node(node)
	if !isKind || nd == nil {
		return nil
	}
	rails := &nd.rails
	b := d.matcher.On(ctx, k, node)
	alloc := d.allocated[node]
	var out []Device
	for i := range nd.Devices {
		if b.Has(i) && !alloc.Has(i) && int(rails.of[i]) == r {
			out = append(out, nd.Devices[i])
		}
	}
	return out
}

// DevicesOf returns node's devices of dimension dim, in position order.
func (d *Devices) DevicesOf(ctx context.Context, node string, dim v1.ResourceName) []Device {
	k, isKind := d.registry.Kind(dim)
	nd := d.matcher.inv.Node(node)
	if !isKind || nd == nil {
		return nil
	}
	b := d.matcher.On(ctx, k, node)
	var out []Device
	for i := range nd.Devices {
		if b.Has(i) {
			out = append(out, nd.Devices[i])
		}
	}
	return out
}

// RailOf returns the rail of a device of node, -1 for none.
func (inv *Inventory) RailOf(node string, name string, driver, pool string) int {
	nd := inv.Node(node)
	if nd == nil {
		return -1
	}
	rails := &nd.rails
	for i := range nd.Devices {
		dv := &nd.Devices[i]
		if dv.Name == name && dv.Driver == driver && dv.Pool == pool {
			return int(rails.of[i])
		}
	}
	return -1
}

// nicRailsByName returns the rails of nics (in PCI order) by their
// configured names; not ok unless every one carries a name.
func nicRailsByName(nd *NodeDevices, nics []pciDevice, named *railNames) ([]int, bool) {
	if named == nil {
		return nil, false
	}
	out := make([]int, len(nics))
	for k, n := range nics {
		name, ok := railNameOf(&nd.Devices[n.pos], named.attrs)
		if !ok {
			return nil, false
		}
		out[k] = named.ids[name]
	}
	return out, true
}
