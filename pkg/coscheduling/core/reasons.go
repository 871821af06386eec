package core

// Reasons of the Events planning records. Each names a situation a person
// would ask about; the note says what is wrong and what would fix it. The
// plugin's other reasons are its own (package coscheduling).
const (
	// ReasonGangTooLarge: the gang would not fit even in an empty cluster.
	ReasonGangTooLarge = "GangTooLarge"
	// ReasonTopologyUnsatisfied: the gang requires one domain of a topology
	// level and none has room now.
	ReasonTopologyUnsatisfied = "TopologyUnsatisfied"
	// ReasonNoFeasibleNodes: a Filter plugin of the profile rejects a
	// member on every node.
	ReasonNoFeasibleNodes = "NoFeasibleNodes"
	// ReasonFilterRejectsPlan: every plan the planner finds puts some
	// member where a Filter plugin rejects it.
	ReasonFilterRejectsPlan = "FilterRejectsPlan"
	// ReasonPermanentPodsInTheWay: the gang would fit an empty cluster but
	// not beside the pods that never finish on their own; it waits without
	// holding capacity.
	ReasonPermanentPodsInTheWay = "PermanentPodsInTheWay"
	// ReasonGangHolding: the gang heads the queue and holds its plan's
	// places, free and still in use, for a bounded time while the rest
	// frees up.
	ReasonGangHolding = "GangHolding"
	// ReasonHoldExpired: the head gang's hold ran out; the gangs behind it
	// use the capacity for as long (backfill) before it may hold again.
	ReasonHoldExpired = "HoldExpired"
)
