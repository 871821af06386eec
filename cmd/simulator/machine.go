package main

import (
	"bufio"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/gpu-gang/gpu-gang/pkg/simulator/report"
)

// thisMachine describes the machine runs measure on, from start.
func thisMachine(start time.Time) report.Machine {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown host"
	}
	return report.Machine{Host: host, CPUs: runtime.NumCPU(), CPUModel: cpuModel(), Date: start.UTC().Format(time.RFC3339)}
}

// cpuModel reads the first CPU's model name from /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, value, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return runtime.GOARCH
}
