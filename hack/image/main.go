// Command image builds gpu-gang's container image without a Docker engine,
// and pushes it. `make image` and `make push` run it:
//
//	image build --repo . --out _output/image --image ghcr.io/gpu-gang/gpu-gang:v0.1.0 \
//	    --version v0.1.0 --commit $(git rev-parse HEAD) --created $(git log -1 --format=%ct)
//	image push --out _output/image --image registry.example.com/gpu-gang:v0.1.0
//
// It is a module of its own so that go-containerregistry's dependencies
// never move the versions the scheduler is built with.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 || (args[0] != "build" && args[0] != "push") {
		fmt.Fprintln(os.Stderr, "usage: image build|push [flags]; image build -h lists the flags")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("image "+cmd, flag.ContinueOnError)
	out := fs.String("out", "_output/image", "directory of the OCI layout (oci/) and the tarball (gpu-gang.tar)")
	image := fs.String("image", "ghcr.io/gpu-gang/gpu-gang:v0.1.0", "registry/name:tag of the image")
	var o Options
	var created string
	if cmd == "build" {
		fs.StringVar(&o.Repo, "repo", ".", "root of the gpu-gang checkout to build")
		fs.StringVar(&o.Version, "version", "", "version stamped into the binaries and the labels (required)")
		fs.StringVar(&o.Commit, "commit", "", "git commit stamped into the binaries and the labels (required)")
		fs.StringVar(&o.Source, "source", "https://github.com/gpu-gang/gpu-gang", "source repository URL, for the labels")
		fs.StringVar(&created, "created", "", "image creation time, in Unix seconds (the commit's time, for reproducible digests); default now")
		fs.StringVar(&o.Arch, "arch", runtime.GOARCH, "GOARCH to build for (the OS is linux)")
		fs.StringVar(&o.Go, "go", "go", "the go command")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments %q\n", fs.Args())
		return 2
	}
	if cmd == "push" {
		digest, err := Push(ctx, *out, *image)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("pushed %s@%s\n", *image, digest)
		return 0
	}

	o.Out, o.Image, o.Log = *out, *image, os.Stdout
	o.Created = time.Now().UTC().Truncate(time.Second)
	if created != "" {
		secs, err := strconv.ParseInt(created, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "--created=%q: want Unix seconds: %v\n", created, err)
			return 2
		}
		o.Created = time.Unix(secs, 0).UTC()
	}
	start := time.Now()
	if _, err := Build(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("image built in %s\n", time.Since(start).Round(100*time.Millisecond))
	return 0
}
