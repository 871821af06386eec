// Package parallel runs a bounded number of API calls at once.
package parallel

import (
	"context"
	"sync"
)

// Do calls fn for 0..n-1 on up to workers goroutines and returns the first
// error; once one call fails, the remaining indices are not started.
func Do(ctx context.Context, n, workers int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(workers, n)) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
