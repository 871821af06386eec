package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// etcdStartTimeout bounds how long an embedded etcd may take to become ready.
const etcdStartTimeout = time.Minute

// embeddedEtcd is an etcd server running in this process.
type embeddedEtcd struct {
	*embed.Etcd
	// logLevel is the level of etcd's own logger; stop raises it, since
	// etcd logs each listener it closes on the way down as an error.
	logLevel zap.AtomicLevel
}

// stop shuts etcd down and waits until it has.
func (e *embeddedEtcd) stop() {
	e.logLevel.SetLevel(zapcore.FatalLevel)
	e.Close()
}

// startEtcd starts a single-member etcd inside this process, storing its data
// in dataDir, and returns it with the URLs its clients use.
//
// etcd needs its ports in its configuration before it listens, so they are
// picked by listening on port 0 and closing again; another process may take
// such a port in between, and then a new pair is tried.
func startEtcd(ctx context.Context, dataDir string) (*embeddedEtcd, []string, error) {
	logger := klog.FromContext(ctx)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		level := zap.NewAtomicLevelAt(zapcore.ErrorLevel)
		cfg, err := etcdConfig(dataDir, level)
		if err != nil {
			return nil, nil, err
		}
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			logger.V(1).Info("Embedded etcd did not start, trying other ports", "attempt", attempt, "err", err)
			continue
		}
		select {
		case <-e.Server.ReadyNotify():
		case err := <-e.Err():
			e.Close()
			return nil, nil, fmt.Errorf("embedded etcd failed while starting: %w", err)
		case <-time.After(etcdStartTimeout):
			e.Close()
			return nil, nil, fmt.Errorf("embedded etcd was not ready within %s", etcdStartTimeout)
		case <-ctx.Done():
			e.Close()
			return nil, nil, context.Cause(ctx)
		}
		var endpoints []string
		for _, u := range cfg.AdvertiseClientUrls {
			endpoints = append(endpoints, u.String())
		}
		logger.V(1).Info("Embedded etcd is ready", "endpoints", endpoints)
		return &embeddedEtcd{Etcd: e, logLevel: level}, endpoints, nil
	}
	return nil, nil, fmt.Errorf("starting embedded etcd: %w", lastErr)
}

func etcdConfig(dataDir string, level zap.AtomicLevel) (*embed.Config, error) {
	ports, err := freeLocalPorts(2)
	if err != nil {
		return nil, err
	}
	zapConfig := zap.NewProductionConfig()
	zapConfig.Level = level
	zapConfig.OutputPaths = []string{"stderr"}
	zapConfig.ErrorOutputPaths = []string{"stderr"}
	zapLogger, err := zapConfig.Build()
	if err != nil {
		return nil, fmt.Errorf("building etcd's logger: %w", err)
	}
	client := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	peer := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}

	cfg := embed.NewConfig()
	cfg.Name = "gpu-gang"
	cfg.Dir = dataDir
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// This etcd lives as long as the process and is never restarted from its
	// data, so durability buys nothing and fsync costs a lot.
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zapLogger.Named("etcd"))
	return cfg, nil
}

// freeLocalPorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago.
func freeLocalPorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		addr, ok := l.Addr().(*net.TCPAddr)
		if !ok {
			return nil, errors.New("listener has no TCP address")
		}
		ports = append(ports, addr.Port)
	}
	return ports, nil
}
