// Package topology places whole gangs on an interconnect hierarchy read from
// node labels.
//
// Levels name the hierarchy: an ordered list of node label keys, tightest
// first (an NVLink clique, then a leaf switch, then a spine...). The node
// itself is always the implicit lowest level and the whole cluster the
// implicit highest. A Tree groups nodes into domains at every level; it is
// built once per node set and shared read-only. The Planner implements
// placement.Planner: it keeps a gang inside the tightest domain that holds it,
// spans as few sub-domains as possible at every level below that, and gives
// neighbouring ranks neighbouring slots.
//
// Nothing here reads the API server; the gang plugin hands everything in as a
// placement.Request.
package topology
