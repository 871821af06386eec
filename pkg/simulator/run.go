package simulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/gpu-gang/gpu-gang/pkg/controlplane"
	"github.com/gpu-gang/gpu-gang/pkg/scheduler"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/fabric"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/internal/parallel"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/lifecycle"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/metrics"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/scenario"
	"github.com/gpu-gang/gpu-gang/pkg/simulator/workload"
)

// Namespace holds every simulated pod and PodGroup.
const Namespace = "sim"

// setupWorkers is how many API calls set-up (nodes, pre-fill) makes at once.
const setupWorkers = 32

// submitJobs and submitPodsPerJob bound the submitter's concurrent creates:
// enough that a burst of arrivals is created in a few seconds on a small
// machine, few enough not to starve the scheduler of the API server.
const (
	submitJobs       = 8
	submitPodsPerJob = 8
)

// prefillTimeout bounds the wait for pre-fill pods to be seen bound.
const prefillTimeout = 2 * time.Minute

// Options configures Run.
type Options struct {
	// Input is what to run; if nil, it is drawn from Scenario.
	Input *Input
	// Scenario is the validated scenario to run when Input is nil.
	Scenario *scenario.Scenario
	// Profile is the scheduler profile's name.
	Profile string
	// SchedulerConfig is gpu-gang's KubeSchedulerConfiguration file.
	SchedulerConfig string
	// CRDs are the CRD files to install (gpu-gang's PodGroup).
	CRDs []string
	// KwokBinary is the kwok executable.
	KwokBinary string
	// SchedulerQPS and SchedulerBurst override the scheduler's client
	// limits, for every profile alike.
	SchedulerQPS   float32
	SchedulerBurst int32
	// ClientQPS and ClientBurst are the simulator's own client limits.
	ClientQPS   float32
	ClientBurst int
	// PartialGrace is how long a gang may be part-bound without counting.
	PartialGrace metrics.Grace
	// SampleInterval is how often occupancy is sampled.
	SampleInterval time.Duration
	// Progress receives a progress line; nil for none.
	Progress io.Writer
	// ProgressTTY redraws the progress line in place rather than printing
	// a new line every ten seconds.
	ProgressTTY bool
	// KwokLog receives kwok's output; nil discards it.
	KwokLog io.Writer
	// ExtraFeatureGates ("Name=true") are set on both kube-apiserver and
	// kube-scheduler in addition to the profile's own.
	ExtraFeatureGates []string
	// SchedulerCommand runs gpu-gang's scheduler command with the
	// arguments that follow it, for profiles whose scheduler runs in a
	// process of its own (cmd/simulator runs itself).
	SchedulerCommand []string
	// SchedulerLog receives such a scheduler process's output; nil
	// discards it.
	SchedulerLog io.Writer
	// Preemption, if set, receives what preemption cost the run (see
	// metrics.PreemptionTracker) when it ends.
	Preemption func(metrics.PreemptionSummary)
}

// runningScheduler is a scheduler started in this process or in one of its
// own.
type runningScheduler interface {
	Done() <-chan struct{}
	Stop() error
}

// Run runs the scenario through one profile on a fresh control plane and
// returns what it measured. Feature gates the profile sets stay set in this
// process afterwards (kube-scheduler's flags set them process-wide), so run
// a gated profile last, or in a process of its own.
func Run(ctx context.Context, opts Options) (res *metrics.Result, err error) {
	logger := klog.FromContext(ctx)
	profile, err := LookupProfile(opts.Profile)
	if err != nil {
		return nil, err
	}
	profile.FeatureGates = append(profile.FeatureGates, opts.ExtraFeatureGates...)
	if slices.Contains(opts.ExtraFeatureGates, "GenericWorkload=true") && !slices.Contains(profile.APIServerFlags, workloadAPIFlag) {
		// With the gate on, the scheduler watches the PodGroup API, which
		// the server must then serve.
		profile.APIServerFlags = append(profile.APIServerFlags, workloadAPIFlag)
	}
	in := opts.Input
	if in == nil {
		if in, err = ScenarioInput(opts.Scenario); err != nil {
			return nil, err
		}
	}
	layout, jobs := in.Layout, in.Jobs
	if in.SchedulerProcess {
		profile.SchedulerProcess = true
	}
	if slices.ContainsFunc(jobs, func(j scenario.Job) bool { return j.Segments != nil }) {
		profile = profile.withComposites()
	}

	cp, err := controlplane.Start(ctx, controlplane.Options{
		APIServerFlags: append(gatesFlag(profile.FeatureGates), profile.APIServerFlags...),
		CRDFiles:       opts.CRDs,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() { err = errors.Join(err, cp.Stop()) }()

	cfg := cp.RESTConfig()
	cfg.QPS, cfg.Burst = opts.ClientQPS, opts.ClientBurst
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	groups, err := pgclientset.NewForConfig(controlplane.JSONConfig(cfg))
	if err != nil {
		return nil, err
	}
	if err := setUp(ctx, kube, layout, jobs); err != nil {
		return nil, err
	}
	dra, err := startDRA(ctx, kube, layout)
	if err != nil {
		return nil, err
	}
	defer dra.stop()

	kwok, err := lifecycle.StartKwok(ctx, lifecycle.KwokOptions{Binary: opts.KwokBinary, Kubeconfig: cp.KubeconfigPath(), Log: opts.KwokLog})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, kwok.Stop()) }()

	tracker, err := metrics.NewTracker(layout, opts.PartialGrace)
	if err != nil {
		return nil, err
	}
	tracker.Expect(jobs)
	builder := &workload.Builder{
		Namespace: Namespace, Flavor: profile.Flavor, SchedulerName: profile.SchedulerName,
		PreferredAsKey: profile.PreferredAsKey,
		NodeAffinity:   profile.nodeAffinity(layout),
		TierKeys: map[string]string{
			scenario.TierClique: layout.TierKeys[fabric.Clique],
			scenario.TierLeaf:   layout.TierKeys[fabric.Leaf],
			scenario.TierSpine:  layout.TierKeys[fabric.Spine],
		},
	}
	tracker.KnowClaims(claimTemplates(builder, jobs), nil)
	preemption := metrics.NewPreemptionTracker(layout, jobs)
	hierarchy := metrics.NewHierarchyTracker(layout, jobs, opts.PartialGrace)
	observers := []podObserver{tracker, preemption, hierarchy}
	samplers := []sampler{tracker}
	var domains *metrics.DomainTracker
	if metrics.WantsDomains(jobs) {
		domains = metrics.NewDomainTracker(layout, jobs, tracker.PodGPUs)
		observers = append(observers, domains)
		samplers = append(samplers, domains)
	}
	stopWatch, err := watchPods(ctx, kube, observers...)
	if err != nil {
		return nil, err
	}
	defer stopWatch()
	if err := prefill(ctx, kube, layout, in.Prefill, tracker); err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "gpu-gang-sim-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	configFile, err := profile.schedulerConfig(opts.SchedulerConfig, dir, Knobs{QPS: opts.SchedulerQPS, Burst: opts.SchedulerBurst})
	if err != nil {
		return nil, err
	}
	submitted := func(job string, at time.Time) {
		tracker.Submitted(job, at)
		preemption.Submitted(job, at)
		if domains != nil {
			domains.Submitted(job, at)
		}
	}
	submitter := &workload.Submitter{
		Kube: kube, Groups: groups, Builder: builder,
		Jobs: submitJobs, PodsPerJob: submitPodsPerJob,
		OnSubmit: submitted,
	}
	if err := submitter.WarmUp(ctx); err != nil {
		return nil, err
	}
	if in.Preload {
		// Every job arrives at 0 s (scenario.Validate): create them all
		// while no scheduler runs; the clock starts with the scheduler.
		logger.Info("Creating the workload before the scheduler starts", "profile", profile.Name, "input", in.Name, "jobs", len(jobs))
		if err := submitter.Run(ctx, time.Now(), jobs); err != nil {
			return nil, fmt.Errorf("creating the workload: %w", err)
		}
	}
	start := time.Now()
	sched, err := startScheduler(ctx, profile, opts, configFile, cp.KubeconfigPath())
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, sched.Stop()) }()

	logger.Info("Running the workload", "profile", profile.Name, "input", in.Name, "jobs", len(jobs), "nodes", len(layout.Nodes), "preloaded", in.Preload)
	if !in.Preload {
		start = time.Now()
	}
	tracker.Start(start)
	if domains != nil {
		domains.Start(start)
	}
	for _, s := range samplers {
		s.Sample(start)
	}
	runCtx, cancel := context.WithTimeoutCause(ctx, in.Timeout, errTimeout)
	defer cancel()
	submitErr := make(chan error, 1)
	if in.Preload {
		// A preloaded job counts as submitted when the scheduler starts:
		// its wait for a scheduler that is starting up is the run's.
		for _, j := range jobs {
			submitted(j.Name, start)
		}
		submitErr <- nil
	} else {
		go func() { submitErr <- submitter.Run(runCtx, start, jobs) }()
	}
	go sample(runCtx, opts.SampleInterval, samplers...)
	inProcess, holdsRead := sched.(*controlplane.Scheduler)
	if holdsRead {
		var waiting func([]*v1.Pod, time.Time)
		if domains != nil {
			waiting = domains.ObserveWaiting
		}
		go sampleHolds(runCtx, tracker, waiting, inProcess, holdsInterval)
	}
	progress := newProgress(opts.Progress, opts.ProgressTTY, profile.Name, tracker, start)
	go progress.run(runCtx)

	timedOut := false
	var runErr error
wait:
	for {
		select {
		case <-tracker.Done():
			break wait
		case err := <-submitErr:
			if err != nil && !errors.Is(err, errTimeout) {
				runErr = fmt.Errorf("submitting the workload: %w", err)
				break wait
			}
			submitErr = nil
		case <-sched.Done():
			runErr = errors.New("the scheduler stopped during the run")
			break wait
		case <-runCtx.Done():
			if ctx.Err() != nil {
				runErr = context.Cause(ctx)
			} else {
				timedOut = true
			}
			break wait
		}
	}
	end := time.Now()
	for _, s := range samplers {
		s.Sample(end)
	}
	progress.finish()
	res = tracker.Result(end, timedOut)
	res.Summary.HoldsUnread = !holdsRead
	if p, ok := sched.(*controlplane.SchedulerProcess); ok {
		// Read before Stop: the peak so far is the run's, scheduling done.
		if res.Summary.SchedulerPeakRSSBytes, err = p.PeakRSS(); err != nil {
			return nil, fmt.Errorf("reading the scheduler process's peak memory: %w", err)
		}
	}
	if profile.FleetAffinity {
		if res.Summary.NotExpressed, err = notExpressed(layout, jobs); err != nil {
			return nil, err
		}
	}
	res.Claims = dra.claims.Summary()
	if layout.Spec.Rails != nil {
		leafOf := map[string]string{}
		for i := range layout.Nodes {
			leafOf[layout.Nodes[i].Name] = layout.Nodes[i].LeafName
		}
		jobOf := map[string]string{}
		for i := range jobs {
			for k := range jobs[i].Pods {
				jobOf[workload.PodName(&jobs[i], k)] = jobs[i].Name
			}
		}
		allocs := dra.claims.Allocations(func(pod string) string { return jobOf[pod] })
		res.Rails = metrics.CountRails(metrics.NewRailMap(layout.ResourceSlices()), allocs, res.Gangs,
			func(node string) string { return leafOf[node] })
	}
	res.Hierarchy = hierarchy.Summary(end, res.Gangs)
	if domains != nil {
		res.Domains = domains.Summary(end)
	}
	if opts.Preemption != nil {
		opts.Preemption(preemption.Summary(profile.Name))
	}
	res.Profile = profile.Name
	res.Scenario = in.Name
	res.Settings = metrics.Settings{
		SchedulerName: profile.SchedulerName,
		SchedulerQPS:  opts.SchedulerQPS, SchedulerBurst: opts.SchedulerBurst,
		ClientQPS: opts.ClientQPS, ClientBurst: opts.ClientBurst,
		PartialGraceSeconds:          opts.PartialGrace.Base.Seconds(),
		PartialGracePerMemberSeconds: opts.PartialGrace.PerMember.Seconds(),
		FeatureGates:                 profile.gatesSummary(),
	}
	if runErr != nil {
		res.Error = runErr.Error()
	}
	return res, runErr
}

var errTimeout = errors.New("the scenario's timeout passed")

// startScheduler starts the profile's scheduler with its configuration
// file: in this process, or in a process of its own if the profile says so.
func startScheduler(ctx context.Context, profile Profile, opts Options, configFile, kubeconfig string) (runningScheduler, error) {
	flags := append(gatesFlag(profile.FeatureGates), profile.SchedulerFlags...)
	if profile.SchedulerProcess {
		if len(opts.SchedulerCommand) == 0 {
			return nil, fmt.Errorf("profile %s runs its scheduler in a process of its own, and no scheduler command was given", profile.Name)
		}
		return controlplane.StartSchedulerProcess(ctx, controlplane.SchedulerProcessOptions{
			Command:    opts.SchedulerCommand,
			ConfigFile: configFile,
			Kubeconfig: kubeconfig,
			Flags:      flags,
			Output:     opts.SchedulerLog,
		})
	}
	return controlplane.StartScheduler(ctx, controlplane.SchedulerOptions{
		ConfigFile: configFile,
		Kubeconfig: kubeconfig,
		Registry:   scheduler.RegistryOptions(),
		Flags:      flags,
	})
}

// setUp creates the namespace, the PriorityClasses the jobs need, the
// nodes, and the DeviceClass and ResourceSlices of DRA nodes.
func setUp(ctx context.Context, kube kubernetes.Interface, layout *fabric.Layout, jobs []scenario.Job) error {
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", Namespace, err)
	}
	for _, pc := range workload.PriorityClasses(jobs) {
		if _, err := kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating PriorityClass %s: %w", pc.Name, err)
		}
	}
	if err := layout.CreateNodes(ctx, kube, setupWorkers); err != nil {
		return err
	}
	return layout.CreateDRA(ctx, kube, setupWorkers)
}

// prefill creates the input's pre-fill pods, bound to their nodes, and
// waits until the tracker has seen them all.
func prefill(ctx context.Context, kube kubernetes.Interface, layout *fabric.Layout, pods []fabric.PrefillPod, tracker *metrics.Tracker) error {
	if len(pods) == 0 {
		return nil
	}
	want := 0
	for _, p := range pods {
		want += p.GPUs
	}
	claims := prefillClaims(layout, pods)
	tracker.KnowClaims(nil, claims)
	err := parallel.Do(ctx, len(pods), setupWorkers, func(ctx context.Context, i int) error {
		node := &layout.Nodes[pods[i].Node]
		if claims[i] != nil {
			if err := createAllocated(ctx, kube, claims[i]); err != nil {
				return err
			}
		}
		pod := workload.PrefillPod(Namespace, i, node.Name, pods[i].GPUs, node.DRA)
		if _, err := kube.CoreV1().Pods(Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pre-fill pod %s: %w", pod.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, prefillTimeout, true, func(context.Context) (bool, error) {
		return tracker.Prefilled() == want, nil
	})
}

// sampler records the fabric's state on the occupancy cadence: Tracker and
// DomainTracker.
type sampler interface{ Sample(now time.Time) }

// sample samples every sampler, in order, every interval until ctx ends.
func sample(ctx context.Context, interval time.Duration, samplers ...sampler) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case now := <-ticker.C:
			for _, s := range samplers {
				s.Sample(now)
			}
		case <-ctx.Done():
			return
		}
	}
}

// ResultFile is where a profile's child process writes its result, in dir.
func ResultFile(dir, profile string) string { return filepath.Join(dir, profile+".json") }

// PreemptionFile is where a profile's child process writes what preemption
// cost its run (metrics.PreemptionSummary), in dir.
func PreemptionFile(dir, profile string) string {
	return filepath.Join(dir, profile+"-preemption.json")
}
