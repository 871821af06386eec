package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"

	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// defaultAPIServerFlags turn off what needs components this control plane
// does not run: ServiceAccount admission rejects pods until the
// controller-manager has created the default service account, and
// TaintNodesByCondition taints new nodes not-ready until a kubelet reports.
var defaultAPIServerFlags = []string{
	"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
}

// NativePodGroupAPIFlags returns the kube-apiserver flags that serve
// Kubernetes' own gang API, scheduling.k8s.io/v1beta1 Workloads and
// PodGroups, with topology constraints: the beta GenericWorkload gate, the
// alpha TopologyAwareWorkloadScheduling gate, and the API group version,
// which a beta API needs on top of its gate. Without them the API is not
// served and the server drops spec.schedulingGroup from pods.
//
// The gates apply to the whole process (see Options.APIServerFlags): a
// kube-scheduler started in it afterwards runs with GenericWorkload on too,
// and its own PodGroup cycle takes pods with spec.schedulingGroup. Run
// gpu-gang's scheduler in a process of its own against such a control
// plane, as a cluster does (StartSchedulerProcess).
func NativePodGroupAPIFlags() []string {
	return []string{
		"--feature-gates=" + nativePodGroupGates,
		nativePodGroupRuntimeConfig,
	}
}

// CompositePodGroupAPIFlags is NativePodGroupAPIFlags with the hierarchies
// above native PodGroups served as well: scheduling.k8s.io/v1alpha3
// CompositePodGroups, behind the alpha CompositePodGroup gate (which needs
// the two gates above) and their own API group version.
func CompositePodGroupAPIFlags() []string {
	return []string{
		"--feature-gates=" + nativePodGroupGates + ",CompositePodGroup=true",
		nativePodGroupRuntimeConfig + ",scheduling.k8s.io/v1alpha3=true",
	}
}

// NativePodGroupDRAAPIFlags is NativePodGroupAPIFlags with the beta
// DRAWorkloadResourceClaims gate on as well (it depends on GenericWorkload):
// native PodGroups then keep spec.resourceClaims, claims shared by the whole
// group (KEP-5729). As with NativePodGroupAPIFlags, the gates apply to the
// whole process: a resource claim controller started in it afterwards
// creates and reserves PodGroup claims.
func NativePodGroupDRAAPIFlags() []string {
	return []string{
		"--feature-gates=" + nativePodGroupGates + ",DRAWorkloadResourceClaims=true",
		nativePodGroupRuntimeConfig,
	}
}

// SchedulerGatesFlag is the feature-gate flag gpu-gang's scheduler runs
// with, as manifests/deploy/deployment.yaml and the Helm chart pass it
// (manifests/deploy_test.go checks both):
//   - GenericWorkload=false: kube-scheduler's own PodGroup cycle would take
//     native gangs from the plugin (see manifests/scheduler-config.yaml);
//   - NominatedNodeNameForExpectation=false: with it on (beta, default on
//     since 1.35), every member that waits in Permit first patches its
//     status.nominatedNodeName, one synchronous API call per member in its
//     binding cycle. A gang released while such calls are in flight binds
//     its members up to seconds apart on a busy API server, and the calls
//     take the server's time from binding. gpu-gang's own holds keep a
//     waiting gang's nodes; the nomination would only tell autoscalers.
const SchedulerGatesFlag = "--feature-gates=GenericWorkload=false,NominatedNodeNameForExpectation=false"

const (
	nativePodGroupGates         = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
	nativePodGroupRuntimeConfig = "--runtime-config=scheduling.k8s.io/v1beta1=true"
)

// Options configures a ControlPlane.
type Options struct {
	// APIServerFlags are kube-apiserver command-line flags added after the
	// defaults, for example NativePodGroupAPIFlags.
	//
	// Feature gates set here also apply to everything else in the process,
	// the in-process scheduler among them, until Stop.
	APIServerFlags []string

	// CRDFiles are YAML files of CustomResourceDefinitions to install before
	// Start returns; Start waits until they are served.
	CRDFiles []string

	// Dir holds etcd's data (in Dir/etcd, which Start empties first: the
	// data of an earlier control plane cannot be reused) and the kubeconfig
	// file. If empty, Start makes a temporary directory and Stop removes it.
	Dir string
}

// ControlPlane is an embedded etcd and a kube-apiserver running in this
// process. Stop it with Stop.
type ControlPlane struct {
	tb         *programTB
	etcd       *embeddedEtcd
	apiServer  *apiservertesting.TestServer
	dir        string
	removeDir  bool
	kubeconfig string

	stopOnce sync.Once
	stopErr  error
}

var controlPlaneCount atomic.Int64

// Start starts etcd and kube-apiserver, writes a kubeconfig file for the
// server and installs opts.CRDFiles. On error, everything already started is
// stopped again.
//
// ctx bounds start-up only; the control plane runs until Stop.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	logger := klog.FromContext(ctx)
	name := fmt.Sprintf("controlplane-%d", controlPlaneCount.Add(1))
	cp := &ControlPlane{tb: newProgramTB(name, logger), dir: opts.Dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, cp.Stop())
		}
	}()

	if cp.dir == "" {
		if cp.dir, err = os.MkdirTemp("", "gpu-gang-controlplane-"); err != nil {
			return nil, err
		}
		cp.removeDir = true
	} else if err := os.MkdirAll(cp.dir, 0o700); err != nil {
		return nil, err
	}

	// etcd starts first and Stop ends it last: kube-apiserver's shutdown
	// hangs if its storage goes away underneath it.
	etcdDir := filepath.Join(cp.dir, "etcd")
	if err := os.RemoveAll(etcdDir); err != nil {
		return nil, err
	}
	etcd, endpoints, err := startEtcd(ctx, etcdDir)
	if err != nil {
		return nil, err
	}
	cp.etcd = etcd

	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = endpoints
	flags := append(append([]string{}, defaultAPIServerFlags...), opts.APIServerFlags...)
	instance := apiservertesting.NewDefaultTestServerOptions()
	// The invariant check scrapes metrics at tear-down to fail tests that
	// leaked requests; it is a test's concern, not this package's.
	instance.DisableInvariantChecks = true

	// The server lives until Stop, not until ctx ends: its TContext is
	// derived from a context that is never canceled, and the starter cancels
	// its own child of it at tear-down. A TB without a Deadline method also
	// keeps the starter from tying the server to a test deadline.
	tCtx := ktesting.InitCtx(context.WithoutCancel(ctx), cp.tb)
	var server apiservertesting.TestServer
	var startErr error
	if err := cp.tb.run(func() {
		server, startErr = apiservertesting.StartTestServer(tCtx, instance, flags, storage)
	}); err != nil || startErr != nil {
		return nil, fmt.Errorf("starting kube-apiserver: %w", errors.Join(startErr, err))
	}
	cp.apiServer = &server

	cp.kubeconfig = filepath.Join(cp.dir, "kubeconfig")
	if err := writeKubeconfig(cp.kubeconfig, server.ClientConfig); err != nil {
		return nil, err
	}
	if len(opts.CRDFiles) > 0 {
		if err := cp.InstallCRDs(ctx, opts.CRDFiles...); err != nil {
			return nil, err
		}
	}
	logger.Info("Control plane is up", "host", server.ClientConfig.Host, "kubeconfig", cp.kubeconfig)
	return cp, nil
}

// RESTConfig returns a new copy of an administrator's client configuration.
// Clients built from it speak protobuf to built-in types; use JSONConfig for
// clients that handle custom resources.
func (cp *ControlPlane) RESTConfig() *rest.Config {
	return rest.CopyConfig(cp.apiServer.ClientConfig)
}

// JSONConfig is RESTConfig with JSON as the content type, which clients of
// custom resources need: the server has no protobuf encoding for them.
func (cp *ControlPlane) JSONConfig() *rest.Config {
	return JSONConfig(cp.RESTConfig())
}

// JSONConfig returns a copy of cfg that sends and accepts JSON only.
func JSONConfig(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.ContentType = "application/json"
	out.AcceptContentTypes = "application/json"
	return out
}

// KubeconfigPath is the kubeconfig file for this control plane, with the
// same administrator's credentials as RESTConfig.
func (cp *ControlPlane) KubeconfigPath() string { return cp.kubeconfig }

// Stop shuts down kube-apiserver, then etcd, and removes the temporary
// directory if Start made one. It may be called more than once; later calls
// return the first call's result.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		var errs []error
		if cp.apiServer != nil {
			errs = append(errs, cp.tb.run(cp.apiServer.TearDownFn))
		}
		// Cleanups registered by the starter restore feature gates and
		// remove its temporary files; none of them need etcd.
		errs = append(errs, cp.tb.runCleanups())
		if cp.etcd != nil {
			cp.etcd.stop()
		}
		if cp.removeDir {
			errs = append(errs, os.RemoveAll(cp.dir))
		}
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}

func writeKubeconfig(path string, cfg *rest.Config) error {
	const name = "gpu-gang"
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters[name] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthority:     cfg.CAFile,
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            cfg.ServerName,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kubeconfig.AuthInfos[name] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		TokenFile:             cfg.BearerTokenFile,
		ClientCertificate:     cfg.CertFile,
		ClientCertificateData: cfg.CertData,
		ClientKey:             cfg.KeyFile,
		ClientKeyData:         cfg.KeyData,
	}
	kubeconfig.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kubeconfig.CurrentContext = name
	if err := clientcmd.WriteToFile(*kubeconfig, path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}
