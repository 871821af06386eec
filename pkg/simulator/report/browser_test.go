package report

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
)

// requireBrowserEnv makes a missing Chromium fail the test instead of
// skipping it; `make test-browser` sets it after installing Chromium.
const requireBrowserEnv = "GPU_GANG_REQUIRE_BROWSER"

// chromium finds a Chromium binary: $CHROMIUM, or Debian's chromium on the
// PATH. Without one the test skips, or fails under requireBrowserEnv.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium on the PATH (or in $CHROMIUM); `make test-browser` installs Debian's chromium and runs this test"
	if os.Getenv(requireBrowserEnv) != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browserRun is a run of two profiles on 3 leaves of 4 nodes, with one
// gang in each placement map.
func browserRun() *Run {
	run := sampleRun()
	for _, r := range run.Results {
		r.Fabric = metrics.FabricSize{Spines: 1, Leaves: 3, Cliques: 6, Nodes: 12, GPUs: 96}
		r.Placement = &metrics.Placement{T: 1}
		for l := range 3 {
			for n := range 4 {
				np := metrics.NodePlacement{Name: fmt.Sprintf("s0-l%d-n%d", l, n), Leaf: l, Clique: 2*l + n/2}
				if l == 0 && n < 2 {
					np.Pods = []metrics.PodSlice{{Job: r.Gangs[0].Name, GPUs: 8}}
				}
				if l == 2 && n == 3 {
					np.Pods = []metrics.PodSlice{{Job: "prefill", GPUs: 3}, {Job: "plain-pod", GPUs: 1}}
				}
				r.Placement.Nodes = append(r.Placement.Nodes, np)
			}
		}
	}
	return run
}

// The HTML report, opened in headless Chromium, logs no console error and
// shows one placement map per profile with one cell per node, and the
// comparison table with a column per profile and a row per metric.
func TestReportInBrowser(t *testing.T) {
	exe := chromium(t)
	run := browserRun()
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	var page bytes.Buffer
	if err := WriteHTML(&page, run); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	// The network is closed here: nothing may reach out for updates,
	// sync or field trials.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(ctx, chromedp.WithLogf(t.Logf))
	defer cancelTab()

	var mu sync.Mutex
	var problems []string
	err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				problems = append(problems, fmt.Sprintf("console.%s: %s", ev.Type, argsText(ev.Args)))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, fmt.Sprintf("exception: %s at %s:%d", ev.ExceptionDetails.Text, ev.ExceptionDetails.URL, ev.ExceptionDetails.LineNumber))
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				problems = append(problems, fmt.Sprintf("%s error: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	})
	if err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}

	// chromedp enables the runtime and log domains on every tab it opens.
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path), chromedp.WaitReady(chromedp.CSS("#comparison"))); err != nil {
		t.Fatalf("opening the report in Chromium: %v", err)
	}
	title := run1(t, ctx, chromedp.Title())
	maps := run1(t, ctx, chromedp.Nodes(chromedp.CSSAll("svg.map")))
	headers := run1(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#comparison tr:first-child th")).map(th => th.textContent)`))
	rows := run1(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#comparison tr").length`))
	if !strings.Contains(title, run.Scenario) {
		t.Errorf("title %q does not name scenario %s", title, run.Scenario)
	}
	if len(maps) != len(run.Results) {
		t.Fatalf("%d placement maps, want one per profile (%d)", len(maps), len(run.Results))
	}
	for _, r := range run.Results {
		sel := fmt.Sprintf(`svg.map[data-profile=%q]`, r.Profile)
		cells := run1(t, ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`Array.from(document.querySelectorAll(%q)).map(g => g.dataset.node)`, sel+" g.node-cell")))
		visible := run1(t, ctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect(); return r.width > 0 && r.height > 0 })()`, sel)))
		var want []string
		for _, n := range r.Placement.Nodes {
			want = append(want, n.Name)
		}
		if strings.Join(cells, " ") != strings.Join(want, " ") {
			t.Errorf("profile %s: the map's node cells are %q, want one per node: %q", r.Profile, cells, want)
		}
		if !visible {
			t.Errorf("profile %s: the placement map has no size on the page", r.Profile)
		}
	}
	wantHeaders := []string{"metric", "better"}
	for _, r := range run.Results {
		wantHeaders = append(wantHeaders, r.Profile)
	}
	if strings.Join(headers, "|") != strings.Join(wantHeaders, "|") {
		t.Errorf("comparison table headers %q, want %q", headers, wantHeaders)
	}
	if want := len(comparisonRows(run)) + 1; rows != want {
		t.Errorf("comparison table has %d rows, want %d (a header and one per metric)", rows, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(problems, "\n"))
	}
}

// run1 runs one action that returns a value, failing the test on error.
func run1[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("in Chromium: %v", err)
	}
	return v
}

func argsText(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		if len(a.Value) > 0 {
			parts = append(parts, string(a.Value))
		} else {
			parts = append(parts, a.Description)
		}
	}
	return strings.Join(parts, " ")
}
