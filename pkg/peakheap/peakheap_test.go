package peakheap

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The files left are those of the highest RSS that was a step above the
// last one written: a smaller rise, or a fall, writes nothing.
func TestRunKeepsTheProfileAtTheHigh(t *testing.T) {
	const mib = 1 << 20
	readings := []int64{10 * mib, 12 * mib, 15 * mib, 14 * mib, 30 * mib, 33 * mib, 20 * mib}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	i := 0
	rss := func() (int64, error) {
		r := readings[i]
		if i++; i == len(readings) {
			cancel()
		}
		return r, nil
	}
	prefix := filepath.Join(t.TempDir(), "sub", "gpu-gang")
	err := Run(ctx, Options{Prefix: prefix, Interval: time.Millisecond, Step: 4 * mib, RSS: rss})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, len(readings), i)

	stats, err := os.ReadFile(StatsFile(prefix))
	require.NoError(t, err)
	lines := strings.Split(string(stats), "\n")
	require.Equal(t, "rss:bytes 31457280", lines[0], "30 MiB was the last reading a step above the last written")
	require.Contains(t, string(stats), "\n/memory/classes/heap/objects:bytes ")
	require.Contains(t, string(stats), "\n/gc/gogc:percent ")
	require.Contains(t, string(stats), "\n/sched/goroutines:goroutines ")
	goroutines, err := os.ReadFile(GoroutinesFile(prefix))
	require.NoError(t, err)
	require.Contains(t, string(goroutines), "goroutine profile: total ")
	require.Contains(t, string(goroutines), "peakheap.TestRunKeepsTheProfileAtTheHigh")

	b, err := os.ReadFile(ProfileFile(prefix))
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Contains(t, string(raw), "inuse_space", "a heap profile names its sample types in its string table")
	_, err = os.Stat(ProfileFile(prefix) + ".tmp")
	require.ErrorIs(t, err, os.ErrNotExist, "no temporary file is left")
}

// The process's own RSS is read from /proc.
func TestStatmRSS(t *testing.T) {
	r, err := statmRSS()
	require.NoError(t, err)
	require.Greater(t, r, int64(1<<20))
}
