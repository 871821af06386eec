package controlplane

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"k8s.io/klog/v2"

	"k8s.io/kubernetes/test/utils/ktesting"
)

// programTB implements ktesting.TB for code that runs outside of go test.
//
// kube-apiserver's in-process starter (and the feature-gate helpers it calls)
// reports problems through a TB and stops with FailNow, as testing.T does,
// by ending the calling goroutine. programTB therefore only supports calls
// made from a goroutine started by run: FailNow ends that goroutine with
// runtime.Goexit, and run turns what was recorded into an error for its
// caller. Cleanup callbacks are kept and run, each through run, by
// runCleanups.
type programTB struct {
	name   string
	logger klog.Logger

	mu       sync.Mutex
	errs     []error
	failed   bool
	cleanups []func()
}

var _ ktesting.TB = &programTB{}

func newProgramTB(name string, logger klog.Logger) *programTB {
	return &programTB{name: name, logger: logger.WithName(name)}
}

// run calls fn on a goroutine of its own and waits for it. It returns the
// errors recorded while fn ran, including the one that made fn stop early
// through FailNow, joined into one. A panic in fn is returned as an error
// too: kube-apiserver's starter parses its flags with pflag.PanicOnError, and
// a mistyped flag should not end the program.
func (tb *programTB) run(fn func()) error {
	tb.mu.Lock()
	first := len(tb.errs)
	tb.mu.Unlock()

	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			// recover returns nil when FailNow ended fn with Goexit.
			if r := recover(); r != nil {
				tb.record(fmt.Errorf("panic: %v", r))
			}
		}()
		fn()
	}()
	<-done

	tb.mu.Lock()
	defer tb.mu.Unlock()
	return errors.Join(tb.errs[first:]...)
}

// runCleanups runs the registered cleanup callbacks in reverse order of
// registration, as testing.T does, each through run so that one calling
// FailNow does not skip the others.
func (tb *programTB) runCleanups() error {
	var errs []error
	for {
		tb.mu.Lock()
		n := len(tb.cleanups)
		if n == 0 {
			tb.mu.Unlock()
			return errors.Join(errs...)
		}
		fn := tb.cleanups[n-1]
		tb.cleanups = tb.cleanups[:n-1]
		tb.mu.Unlock()
		if err := tb.run(fn); err != nil {
			errs = append(errs, err)
		}
	}
}

func (tb *programTB) record(err error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.errs = append(tb.errs, err)
	tb.failed = true
}

func (tb *programTB) Attr(key, value string) { tb.logger.V(2).Info("Attribute", key, value) }

func (tb *programTB) Chdir(dir string) {
	old, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.Chdir(old) })
}

func (tb *programTB) Cleanup(fn func()) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, fn)
}

func (tb *programTB) Error(args ...any) {
	msg := fmt.Sprint(args...)
	tb.logger.Error(nil, msg)
	tb.record(errors.New(msg))
}

func (tb *programTB) Errorf(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	tb.logger.Error(nil, err.Error())
	tb.record(err)
}

func (tb *programTB) Fail() {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.failed = true
}

// FailNow ends the calling goroutine, which must have been started by run.
func (tb *programTB) FailNow() {
	tb.Fail()
	runtime.Goexit()
}

func (tb *programTB) Failed() bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.failed
}

func (tb *programTB) Fatal(args ...any) {
	tb.record(errors.New(fmt.Sprint(args...)))
	tb.FailNow()
}

func (tb *programTB) Fatalf(format string, args ...any) {
	tb.record(fmt.Errorf(format, args...))
	tb.FailNow()
}

func (tb *programTB) Helper() {}

func (tb *programTB) Log(args ...any) { tb.logger.V(1).Info(fmt.Sprint(args...)) }

func (tb *programTB) Logf(format string, args ...any) {
	tb.logger.V(1).Info(fmt.Sprintf(format, args...))
}

func (tb *programTB) Name() string { return tb.name }

func (tb *programTB) Setenv(key, value string) {
	old, had := os.LookupEnv(key)
	if err := os.Setenv(key, value); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if had {
			_ = os.Setenv(key, old)
		} else {
			_ = os.Unsetenv(key)
		}
	})
}

// Skip, Skipf and SkipNow have no meaning in a program: the code that called
// them gave up, so they stop it like FailNow, with an error saying why.
func (tb *programTB) Skip(args ...any) {
	tb.record(fmt.Errorf("skipped: %s", fmt.Sprint(args...)))
	tb.FailNow()
}

func (tb *programTB) Skipf(format string, args ...any) {
	tb.record(fmt.Errorf("skipped: "+format, args...))
	tb.FailNow()
}

func (tb *programTB) SkipNow() {
	tb.record(errors.New("skipped"))
	tb.FailNow()
}

func (tb *programTB) Skipped() bool { return false }

func (tb *programTB) TempDir() string {
	dir, err := os.MkdirTemp("", "gpu-gang-"+tb.name+"-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
