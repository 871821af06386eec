package contract

import "context"

// simulationKey marks a context in which the gang plugin runs the
// profile's PreFilter and Filter plugins for members it plans, not for a
// pod in a scheduling cycle.
type simulationKey struct{}

// WithSimulation returns ctx marked as a simulated run: the gang plugin
// passes it to the profile's PreFilter and Filter plugins when it asks
// them about members it plans (eligibility, verification, lessons).
func WithSimulation(ctx context.Context) context.Context {
	return context.WithValue(ctx, simulationKey{}, true)
}

// Simulated reports whether ctx is a simulated run (WithSimulation). The
// gang plugin's own PreFilter stays out of the way there: it is the one
// asking.
func Simulated(ctx context.Context) bool {
	v, _ := ctx.Value(simulationKey{}).(bool)
	return v
}
