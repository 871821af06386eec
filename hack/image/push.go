package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Push uploads the image of the OCI layout in out (as Build wrote it) to
// image, a registry/name:tag, with the credentials `docker login`,
// `crane auth login` or a credential helper left in ~/.docker/config.json.
// It returns the digest pushed.
func Push(ctx context.Context, out, image string) (v1.Hash, error) {
	ref, err := name.NewTag(image, name.WeakValidation)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("--image %q: %w", image, err)
	}
	img, err := layoutImage(filepath.Join(out, layoutDir))
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %s: %w", ref, err)
	}
	return digest, nil
}

// layoutImage reads the one image of an OCI layout Build wrote.
func layoutImage(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the OCI layout %s (run make image first): %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("the OCI layout %s holds %d manifests, want the one image make image writes", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}
