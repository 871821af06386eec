package childproc

import (
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// exitTimeout bounds the waits for a child to exit.
const exitTimeout = 10 * time.Second

func start(t *testing.T, script string) *Child {
	t.Helper()
	c, err := Start(exec.Command("sh", "-c", script))
	require.NoError(t, err)
	t.Cleanup(c.Kill)
	return c
}

// startReady starts a shell script and returns once it has printed
// "ready".
func startReady(t *testing.T, script string) *Child {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	c, err := Start(cmd)
	require.NoError(t, err)
	t.Cleanup(c.Kill)
	buf := make([]byte, len("ready\n"))
	_, err = io.ReadFull(out, buf)
	require.NoError(t, err)
	require.Equal(t, "ready\n", string(buf))
	return c
}

func TestStopEndsARunningChildWithSIGTERM(t *testing.T) {
	c := start(t, "exec sleep 60")
	exited, _ := c.Exited()
	require.False(t, exited)
	require.True(t, c.Stop(exitTimeout), "the child was running")
	exited, err := c.Exited()
	require.True(t, exited)
	require.ErrorContains(t, err, "signal: terminated")
}

func TestStopKillsAChildThatIgnoresSIGTERM(t *testing.T) {
	// The shell says when its trap is set, so SIGTERM never comes first.
	c := startReady(t, `trap "" TERM; echo ready; while :; do sleep 1; done`)

	begun := time.Now()
	require.True(t, c.Stop(200*time.Millisecond))
	require.GreaterOrEqual(t, time.Since(begun), 200*time.Millisecond, "SIGKILL only after the grace period")
	_, err := c.Exited()
	require.ErrorContains(t, err, "signal: killed")
}

func TestStopAfterTheChildExitedOnItsOwn(t *testing.T) {
	c := start(t, "exit 3")
	select {
	case <-c.Done():
	case <-time.After(exitTimeout):
		t.Fatal("the child did not exit")
	}
	require.False(t, c.Stop(exitTimeout), "nothing to stop")
	exited, err := c.Exited()
	require.True(t, exited)
	require.ErrorContains(t, err, "exit status 3")
}

func TestKill(t *testing.T) {
	c := start(t, "exec sleep 60")
	c.Kill()
	exited, err := c.Exited()
	require.True(t, exited)
	require.ErrorContains(t, err, "signal: killed")
	c.Kill() // a second Kill of an exited child returns at once
}

// PeakRSS sees memory the child holds, while it runs (VmHWM) and after it
// has exited (rusage); a shell that holds a 40 MB string is the child.
func TestPeakRSSWhileRunningAndAfterExit(t *testing.T) {
	const held = 40 << 20
	c := startReady(t, `x=$(head -c 41943040 /dev/zero | tr '\0' a); echo ready; while :; do sleep 1; done`)
	running, err := c.PeakRSS()
	require.NoError(t, err)
	require.GreaterOrEqual(t, running, int64(held), "peak RSS while running")
	c.Stop(exitTimeout)
	exited, err := c.PeakRSS()
	require.NoError(t, err)
	require.GreaterOrEqual(t, exited, int64(held), "peak RSS after exit")
}
