package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// module is the Go module the binaries are built from.
const module = "github.com/gpu-gang/gpu-gang"

// Binaries are the image's programs, at the root of its filesystem, as the
// Deployments' commands name them. The first is the entrypoint.
var binaries = []struct{ name, pkg string }{
	{"gpu-gang-scheduler", "./cmd/scheduler"},
	{"podgroup-controller", "./cmd/podgroup-controller"},
}

// OCI label keys (the image-spec's pre-defined annotation keys).
const (
	labelVersion     = "org.opencontainers.image.version"
	labelRevision    = "org.opencontainers.image.revision"
	labelSource      = "org.opencontainers.image.source"
	labelCreated     = "org.opencontainers.image.created"
	labelTitle       = "org.opencontainers.image.title"
	labelDescription = "org.opencontainers.image.description"
	labelRefName     = "org.opencontainers.image.ref.name"
)

// Output names inside Options.Out.
const (
	layoutDir   = "oci"
	tarballName = "gpu-gang.tar"
)

// Options say what to build.
type Options struct {
	// Repo is the root of the gpu-gang checkout to build.
	Repo string
	// Out receives the OCI layout (Out/oci) and the tarball
	// (Out/gpu-gang.tar); both are replaced.
	Out string
	// Image is the reference the image is tagged with, registry/name:tag.
	Image string
	// Version and Commit are stamped into the binaries (pkg/version) and
	// the labels.
	Version, Commit string
	// Source is the URL of the source repository, for the labels.
	Source string
	// Created is the image's creation time: the commit's time, so that a
	// build of the same commit gives the same digest.
	Created time.Time
	// Arch is the GOARCH to build for; the OS is linux.
	Arch string
	// Go is the go command.
	Go string
	// Log receives progress; nil discards it.
	Log io.Writer
}

// Result describes a built image.
type Result struct {
	// Digest is the manifest's digest.
	Digest v1.Hash
	// CompressedSize sums the compressed layers, config and manifest: what
	// a registry stores and a node pulls.
	CompressedSize int64
	// Layout and Tarball are the paths written.
	Layout, Tarball string
}

// Build compiles the binaries statically and assembles the image around
// them with no Docker engine: an empty base, a layer of users, CA
// certificates and directories made from nothing, and a layer with the
// binaries. It writes an OCI layout and a tarball that `docker load` and
// `kind load image-archive` read.
func Build(ctx context.Context, o Options) (*Result, error) {
	ref, err := name.NewTag(o.Image, name.WeakValidation)
	if err != nil {
		return nil, fmt.Errorf("--image %q: %w", o.Image, err)
	}
	if o.Version == "" || o.Commit == "" {
		return nil, fmt.Errorf("a version and a commit are needed for the binaries and the labels")
	}
	if o.Arch == "" {
		return nil, fmt.Errorf("no target architecture")
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	binDir, err := os.MkdirTemp("", "gpu-gang-image-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(binDir) }()

	start := time.Now()
	var binFiles []file
	for _, b := range binaries {
		path := filepath.Join(binDir, b.name)
		if err := goBuild(ctx, o, b.pkg, path); err != nil {
			return nil, err
		}
		f, err := binaryFile(path, b.name)
		if err != nil {
			return nil, err
		}
		binFiles = append(binFiles, f)
	}
	logf("built %d static binaries for linux/%s in %s", len(binaries), o.Arch, time.Since(start).Round(100*time.Millisecond))

	base, err := baseFiles()
	if err != nil {
		return nil, err
	}
	var layers []v1.Layer
	for _, files := range [][]file{base, binFiles} {
		l, err := layerOf(files, o.Created)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	img, err := assemble(layers, o)
	if err != nil {
		return nil, err
	}
	return write(img, o, ref, logf)
}

// goBuild builds pkg of the checkout into out as a static linux binary,
// with the version and commit set at link time. Never -trimpath (see the
// Makefile); -s -w drop the symbol table and DWARF, which a production
// image does not need and which make up a third of the size.
func goBuild(ctx context.Context, o Options, pkg, out string) error {
	ldflags := fmt.Sprintf("-s -w -X %[1]s/pkg/version.version=%[2]s -X %[1]s/pkg/version.commit=%[3]s", module, o.Version, o.Commit)
	cmd := exec.CommandContext(ctx, o.Go, "build", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = o.Repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, stderr.Bytes())
	}
	return nil
}

// layerOf makes a gzip-compressed OCI layer of files.
func layerOf(files []file, modTime time.Time) (v1.Layer, error) {
	data, err := tarOf(files, modTime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// assemble puts the layers on an empty base with the runtime configuration
// and the labels.
func assemble(layers []v1.Layer, o Options) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.Arch
	cf.Created = v1.Time{Time: o.Created}
	cf.Config = v1.Config{
		Entrypoint: []string{"/" + binaries[0].name},
		User:       strconv.Itoa(nonrootUID) + ":" + strconv.Itoa(nonrootUID),
		WorkingDir: "/",
		Env: []string{
			"PATH=/",
			"SSL_CERT_FILE=/" + caBundlePath,
		},
		Labels: labels(o),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels(o)).(v1.Image), nil
}

// labels are the OCI labels, on the config and on the manifest alike.
func labels(o Options) map[string]string {
	return map[string]string{
		labelVersion:     o.Version,
		labelRevision:    o.Commit,
		labelSource:      o.Source,
		labelCreated:     o.Created.UTC().Format(time.RFC3339),
		labelTitle:       "gpu-gang",
		labelDescription: "gpu-gang-scheduler (kube-scheduler with gang admission and interconnect-aware placement) and podgroup-controller",
	}
}

// write writes the OCI layout and the tarball, replacing earlier ones.
func write(img v1.Image, o Options, ref name.Tag, logf func(string, ...any)) (*Result, error) {
	res := &Result{Layout: filepath.Join(o.Out, layoutDir), Tarball: filepath.Join(o.Out, tarballName)}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(res.Layout); err != nil {
		return nil, err
	}
	p, err := layout.Write(res.Layout, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{labelRefName: ref.TagStr()})); err != nil {
		return nil, fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := tarball.WriteToFile(res.Tarball, ref, img); err != nil {
		return nil, fmt.Errorf("writing the tarball: %w", err)
	}
	if res.Digest, err = img.Digest(); err != nil {
		return nil, err
	}
	if res.CompressedSize, err = compressedSize(img); err != nil {
		return nil, err
	}
	logf("image %s@%s: %.1f MiB compressed", ref, res.Digest, float64(res.CompressedSize)/(1<<20))
	logf("wrote %s (OCI layout) and %s (docker load -i)", res.Layout, res.Tarball)
	return res, nil
}

// compressedSize adds up what a registry stores for img.
func compressedSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	size := m.Config.Size + int64(len(raw))
	for _, l := range m.Layers {
		size += l.Size
	}
	return size, nil
}
