// Package childproc runs programs beside this one, each in a process of its
// own (a scheduler, kwok, an operator): started so that it dies with this
// process, even when this one is killed, and stopped gently first. The
// control plane's scheduler processes, the simulator's kwok and the
// integration tests' processes all run this way.
package childproc

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Child is a program running in a process of its own, started by Start.
// Its methods are safe for concurrent use.
type Child struct {
	cmd *exec.Cmd
	// done is closed once the process has exited and err is set.
	done chan struct{}
	err  error
}

// Start starts cmd, which must not have been started, as a Child. It sets
// cmd.SysProcAttr so that the child gets SIGKILL when this process dies.
func Start(cmd *exec.Cmd) (*Child, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Child{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = cmd.Wait()
	}()
	return c, nil
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Done is closed once the child has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// Exited reports whether the child has exited, and the error it exited
// with (nil for a clean exit).
func (c *Child) Exited() (bool, error) {
	select {
	case <-c.done:
		return true, c.err
	default:
		return false, nil
	}
}

// Kill ends the child with SIGKILL, as the OOM killer or a lost node would,
// and waits for it.
func (c *Child) Kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// Stop ends the child with SIGTERM, or SIGKILL if it takes longer than
// grace, and waits for it. It reports whether the child was still running:
// if not, Exited says how it ended on its own.
func (c *Child) Stop(grace time.Duration) (wasRunning bool) {
	if exited, _ := c.Exited(); exited {
		return false
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		c.Kill()
	}
	return true
}

// PeakRSS is the most resident memory the child has used so far, in bytes:
// while it runs, VmHWM from /proc/<pid>/status; once it has exited, the
// maximum resident set size the kernel reported for it at exit.
func (c *Child) PeakRSS() (int64, error) {
	if exited, _ := c.Exited(); exited {
		usage, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage)
		if !ok || usage == nil {
			return 0, errors.New("the exited process's resource usage is not available")
		}
		return usage.Maxrss * 1024, nil // Linux reports kilobytes
	}
	return vmHWM(fmt.Sprintf("/proc/%d/status", c.Pid()))
}

// vmHWM reads the VmHWM line ("VmHWM:   123456 kB") of a status file.
func vmHWM(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: VmHWM %q: %w", path, rest, err)
		}
		return kb * 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s has no VmHWM line", path)
}
