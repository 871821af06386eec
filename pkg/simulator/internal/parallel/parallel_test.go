package parallel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDoCallsEveryIndexOnce(t *testing.T) {
	var seen [100]atomic.Int32
	require.NoError(t, Do(t.Context(), len(seen), 7, func(_ context.Context, i int) error {
		seen[i].Add(1)
		return nil
	}))
	for i := range seen {
		require.Equal(t, int32(1), seen[i].Load(), "index %d", i)
	}
}

func TestDoStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	err := Do(t.Context(), 1000, 1, func(_ context.Context, i int) error {
		calls.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.Less(t, calls.Load(), int32(10), "indices after the failure are not started")
}
