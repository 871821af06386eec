package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// testOptions build an image with a version and commit no other build
// uses, so that a binary that reports them was built by this test.
func testOptions(t *testing.T) Options {
	t.Helper()
	return Options{
		Repo:    "../..",
		Out:     t.TempDir(),
		Image:   "registry.test/gpu-gang:test",
		Version: "v9.9.9-imagetest",
		Commit:  "0123456789abcdef-imagetest",
		Source:  "https://example.test/gpu-gang",
		Created: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Arch:    runtime.GOARCH,
		Go:      "go",
	}
}

// The image `make image` builds: its configuration and labels, the files of
// its layers, and binaries in them that are static, were built from this
// checkout with the version and commit asked for, and run.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both binaries without cgo; skipped with -short")
	}
	o := testOptions(t)
	res, err := Build(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	img, err := layoutImage(res.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := img.Digest(); err != nil || d != res.Digest {
		t.Fatalf("the OCI layout holds %v (%v), Build reported %v", d, err, res.Digest)
	}

	t.Run("config", func(t *testing.T) {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != o.Arch {
			t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, o.Arch)
		}
		want := v1.Config{
			Entrypoint: []string{"/gpu-gang-scheduler"},
			User:       "65532:65532",
			WorkingDir: "/",
			Env:        []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
			Labels: map[string]string{
				"org.opencontainers.image.version":     o.Version,
				"org.opencontainers.image.revision":    o.Commit,
				"org.opencontainers.image.source":      o.Source,
				"org.opencontainers.image.created":     "2026-11-30T12:00:00Z",
				"org.opencontainers.image.title":       "gpu-gang",
				"org.opencontainers.image.description": labels(o)[labelDescription],
			},
		}
		if diff := cmp.Diff(want, cf.Config); diff != "" {
			t.Errorf("config (-want,+got):\n%s", diff)
		}
		if !cf.Created.Time.Equal(o.Created) {
			t.Errorf("created %s, want %s", cf.Created.Time, o.Created)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
			t.Errorf("media types %s, %s; want OCI", m.MediaType, m.Config.MediaType)
		}
		if diff := cmp.Diff(want.Labels, m.Annotations); diff != "" {
			t.Errorf("manifest annotations (-want,+got):\n%s", diff)
		}
	})

	files := extract(t, img)
	t.Run("filesystem", func(t *testing.T) {
		var names []string
		for n := range files {
			names = append(names, n)
		}
		for _, want := range []string{"etc/passwd", "etc/group", "etc/nsswitch.conf", caBundlePath, "tmp", "home/nonroot", "gpu-gang-scheduler", "podgroup-controller"} {
			if _, ok := files[want]; !ok {
				t.Errorf("the image has no /%s; it has %q", want, names)
			}
		}
		for _, n := range []string{"bin/sh", "bin", "usr", "lib"} {
			if _, ok := files[n]; ok {
				t.Errorf("the image has /%s; it should hold only what the binaries need", n)
			}
		}
		if files["etc/passwd"] == nil || !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") {
			t.Errorf("/etc/passwd has no nonroot user 65532:\n%s", files["etc/passwd"].data)
		}
		if f := files["tmp"]; f == nil || f.header.Mode&0o1777 != 0o1777 {
			t.Errorf("/tmp is missing or not mode 1777")
		}
		if files[caBundlePath] == nil {
			t.Fatalf("no /%s", caBundlePath)
		}
		pool, n := x509.NewCertPool(), 0
		for rest := files[caBundlePath].data; ; {
			var block *pem.Block
			if block, rest = pem.Decode(rest); block == nil {
				break
			}
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatalf("CA bundle: %v", err)
			}
			pool.AddCert(cert)
			n++
		}
		if n < 100 {
			t.Errorf("the CA bundle holds %d certificates, want the Mozilla roots (over 100)", n)
		}
	})

	t.Run("binaries", func(t *testing.T) {
		kubernetes := goList(t, "k8s.io/kubernetes")
		dir := t.TempDir()
		for _, b := range binaries {
			f := files[b.name]
			if f == nil {
				t.Fatalf("no /%s", b.name)
			}
			if f.header.Uid != 0 || f.header.Mode&0o777 != 0o755 {
				t.Errorf("/%s: uid %d, mode %o; want root-owned 755, not writable by the user the image runs as", b.name, f.header.Uid, f.header.Mode)
			}
			path := filepath.Join(dir, b.name)
			if err := os.WriteFile(path, f.data, 0o755); err != nil {
				t.Fatal(err)
			}
			assertStatic(t, path)
			out, err := exec.CommandContext(t.Context(), path, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v\n%s", b.name, err, out)
			}
			want := b.name + " " + o.Version + " (commit " + o.Commit + ", " + runtime.Version() + ", kubernetes " + kubernetes +
				", linux/" + o.Arch + ", module " + module + ")"
			if got := strings.TrimSpace(string(out)); got != want {
				t.Errorf("%s --version:\n got %s\nwant %s", b.name, got, want)
			}
		}
	})

	t.Run("docker load tarball holds the same image", func(t *testing.T) {
		tag, err := name.NewTag(o.Image)
		if err != nil {
			t.Fatal(err)
		}
		fromTar, err := tarball.ImageFromPath(res.Tarball, &tag)
		if err != nil {
			t.Fatal(err)
		}
		for _, get := range []func(v1.Image) (any, error){
			func(i v1.Image) (any, error) { return i.ConfigName() },
			func(i v1.Image) (any, error) {
				ls, err := i.Layers()
				var ids []v1.Hash
				for _, l := range ls {
					id, err := l.DiffID()
					if err != nil {
						return nil, err
					}
					ids = append(ids, id)
				}
				return ids, err
			},
		} {
			want, err1 := get(img)
			got, err2 := get(fromTar)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("tarball differs from the OCI layout (-layout,+tarball):\n%s", diff)
			}
		}
	})

	t.Run("reproducible", func(t *testing.T) {
		again := o
		again.Out = t.TempDir()
		res2, err := Build(t.Context(), again)
		if err != nil {
			t.Fatal(err)
		}
		if res2.Digest != res.Digest {
			t.Errorf("a second build of the same commit gave %s, the first %s", res2.Digest, res.Digest)
		}
	})
}

// Bad options fail before anything is built.
func TestBuildRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"bad reference", func(o *Options) { o.Image = "UPPER/Case:tag" }, "--image"},
		{"no version", func(o *Options) { o.Version = "" }, "a version and a commit"},
		{"no commit", func(o *Options) { o.Commit = "" }, "a version and a commit"},
		{"no architecture", func(o *Options) { o.Arch = "" }, "no target architecture"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			tc.change(&o)
			if _, err := Build(t.Context(), o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// entry is one file of the image's flattened filesystem.
type entry struct {
	header *tar.Header
	data   []byte
}

// extract flattens the image's layers as a container runtime would.
func extract(t *testing.T, img v1.Image) map[string]*entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	out := map[string]*entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := io.Copy(&b, tr); err != nil {
			t.Fatal(err)
		}
		// Directory names lose their trailing slash in the flattened tar.
		out[strings.TrimSuffix(h.Name, "/")] = &entry{header: h, data: b.Bytes()}
	}
}

// assertStatic fails unless path is an ELF executable that needs no
// dynamic loader or shared library: the image has neither.
func assertStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s asks for a dynamic loader: built with cgo?", filepath.Base(path))
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %q", filepath.Base(path), libs)
	}
}

// goList returns the version of module m the checkout builds with, after
// replace directives.
func goList(t *testing.T, m string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", m)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", m, err)
	}
	return strings.TrimSpace(string(out))
}
