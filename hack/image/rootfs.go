package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's unprivileged user, as distroless's "nonroot": the Deployments
// run as this UID and refuse to run as root.
const (
	nonrootUID  = 65532
	nonrootName = "nonroot"
)

// caBundlePath is where Go's crypto/x509 looks first on Linux.
const caBundlePath = "etc/ssl/certs/ca-certificates.crt"

// file is one entry of a layer.
type file struct {
	name     string
	mode     fs.FileMode // permission bits; fs.ModeDir for a directory
	uid, gid int
	data     []byte
}

// baseFiles is the root filesystem under the binaries, assembled from
// nothing: the users, the CA certificates and the directories a Go program
// may touch. No shell, no package manager, no libc: the binaries are static.
func baseFiles() ([]file, error) {
	certs, err := caBundle()
	if err != nil {
		return nil, err
	}
	return []file{
		{name: "etc/", mode: fs.ModeDir | 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", nonrootName, nonrootUID))},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n",
			nonrootName, nonrootUID, nonrootUID, nonrootName, nonrootName))},
		// Go's resolver reads this for the order of files and DNS.
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/ssl/", mode: fs.ModeDir | 0o755},
		{name: "etc/ssl/certs/", mode: fs.ModeDir | 0o755},
		{name: caBundlePath, mode: 0o644, data: certs},
		{name: "home/", mode: fs.ModeDir | 0o755},
		{name: "home/" + nonrootName + "/", mode: fs.ModeDir | 0o700, uid: nonrootUID, gid: nonrootUID},
		{name: "root/", mode: fs.ModeDir | 0o700},
		{name: "tmp/", mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}, nil
}

// caBundle renders the Mozilla roots that golang.org/x/crypto ships as a
// Go module into one PEM file. Roots that Mozilla trusts only with a
// constraint (such as "not for certificates issued after a date") cannot be
// written into a PEM bundle, so they are left out rather than trusted
// without it.
func caBundle() ([]byte, error) {
	var b bytes.Buffer
	n := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if err := pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("golang.org/x/crypto/x509roots/fallback/bundle holds no unconstrained root")
	}
	return b.Bytes(), nil
}

// binaryFile reads a built binary as a layer entry at /name, owned by root
// and not writable by the user the image runs as.
func binaryFile(path, name string) (file, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return file{}, err
	}
	return file{name: name, mode: 0o755, data: data}, nil
}

// tarOf writes files into an uncompressed tar with every time set to
// modTime and no host user names, so that the same inputs give the same
// layer digest on any machine.
func tarOf(files []file, modTime time.Time) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name,
			Mode:    int64(f.mode.Perm()),
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: modTime,
		}
		if f.mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		if f.mode.IsDir() {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
