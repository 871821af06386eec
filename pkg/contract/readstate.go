package contract

import (
	"fmt"
	"reflect"

	fwk "k8s.io/kube-scheduler/framework"
)

// ReadState returns the state under key in cs as a T: a plugin's own
// concrete state, or a contract's interface. It is the one typed read of a
// CycleState every plugin's getter goes through, so that a missing state
// and a state of another type fail alike, with the key named.
func ReadState[T any](cs fwk.CycleState, key fwk.StateKey) (T, error) {
	var zero T
	data, err := cs.Read(key)
	if err != nil {
		return zero, fmt.Errorf("reading %q from cycle state: %w", key, err)
	}
	s, ok := data.(T)
	if !ok {
		return zero, fmt.Errorf("%q in cycle state has type %T, not %v", key, data, reflect.TypeFor[T]())
	}
	return s, nil
}
