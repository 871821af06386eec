package core

import (
	"errors"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpu-gang/gpu-gang/pkg/gang"
)

// StatusError carries a status through pkg/gang's decisions, which return
// errors, back to the extension point that rejects with it.
type StatusError struct{ Status *fwk.Status }

func (e StatusError) Error() string { return e.Status.Message() }

// AsError wraps a failed status; nil stays nil.
func AsError(s *fwk.Status) error {
	if s == nil {
		return nil
	}
	return StatusError{s}
}

// UnitStatus is the status to reject with after a unit's decision failed
// with err: its own status (StatusError), UnschedulableAndUnresolvable for
// a unit that waits for members (nothing but new members can change that),
// or the error itself.
func UnitStatus(err error) *fwk.Status {
	var se StatusError
	var we *gang.WaitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return se.Status
	case errors.As(err, &we):
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, we.Reason)
	}
	return fwk.AsStatus(err)
}
