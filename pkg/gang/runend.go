package gang

// RunEnd is how a gang's run ended, as its members' phases say.
type RunEnd int

const (
	// RunNotEnded: some member is still waiting or bound, or none has
	// finished in a way that ends the run.
	RunNotEnded RunEnd = iota
	// RunFinished: every member has finished and none failed.
	RunFinished
	// RunFailed: every member has finished and some failed.
	RunFailed
)

// RunEndOf decides whether a gang's run is over, and how, from its
// members: active counts those still waiting or bound (not finished, not
// being deleted), succeeded and failed count those that finished so, and
// started says whether the gang ran before (a status said so).
//
// A run is over once no member is active. It finished when some member
// succeeded and none failed, provided the gang had started or minMember
// members succeeded: a gang whose few members succeeded before the rest
// existed never ran as a gang. It failed when some member failed, provided
// the gang had started or minMember members finished.
func RunEndOf(minMember, active, succeeded, failed int32, started bool) RunEnd {
	switch {
	case active > 0:
		return RunNotEnded
	case succeeded > 0 && failed == 0 && (started || succeeded >= minMember):
		return RunFinished
	case failed > 0 && (started || succeeded+failed >= minMember):
		return RunFailed
	}
	return RunNotEnded
}
