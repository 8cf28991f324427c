package image

import (
	"fmt"
	"strings"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"hostkit.dev/lib/wire"
)

// Layer media types this package (and umoci 0.4.7) can unpack.
var layerTypes = map[string]bool{
	v1.MediaTypeImageLayer:     true,
	v1.MediaTypeImageLayerGzip: true,
}

// decodeLayoutFile checks the oci-layout file (image-layout.md,
// "oci-layout file"). Errors: CodeInvalid, CodeUnsupported.
func decodeLayoutFile(b []byte) error {
	var l v1.ImageLayout
	if err := decodeStrict(b, &l, false); err != nil {
		return wire.Wrap(CodeInvalid, "oci-layout does not decode", err)
	}
	if l.Version != v1.ImageLayoutVersion {
		return wire.Errorf(CodeUnsupported, "oci-layout version is not %s", v1.ImageLayoutVersion)
	}
	return nil
}

// decodeIndex decodes and checks index.json (image-index.md): schema
// version 2, at most maxEntries descriptors, each well formed. Errors:
// CodeInvalid, CodeUnsupported, CodeTooLarge.
func decodeIndex(b []byte, maxEntries int) (*v1.Index, error) {
	var idx v1.Index
	if err := decodeStrict(b, &idx, false); err != nil {
		return nil, wire.Wrap(CodeInvalid, "index.json does not decode", err)
	}
	if idx.SchemaVersion != 2 {
		return nil, wire.Errorf(CodeInvalid, "index.json schemaVersion is not 2")
	}
	if idx.MediaType != "" && idx.MediaType != v1.MediaTypeImageIndex {
		return nil, wire.Errorf(CodeInvalid, "index.json has the wrong mediaType")
	}
	if len(idx.Manifests) > maxEntries {
		return nil, wire.Errorf(CodeTooLarge, "index.json lists more than %d manifests", maxEntries)
	}
	for i, d := range idx.Manifests {
		if err := checkDescriptor(d, fmt.Sprintf("index entry %d", i)); err != nil {
			return nil, err
		}
	}
	return &idx, nil
}

// decodeManifest decodes and checks a manifest blob (manifest.md). Errors:
// CodeInvalid, CodeUnsupported, CodeTooLarge.
func decodeManifest(b []byte, maxLayers int) (*v1.Manifest, error) {
	var m v1.Manifest
	if err := decodeStrict(b, &m, false); err != nil {
		return nil, wire.Wrap(CodeInvalid, "the manifest does not decode", err)
	}
	switch {
	case m.SchemaVersion != 2:
		return nil, wire.Errorf(CodeInvalid, "the manifest schemaVersion is not 2")
	case m.MediaType != "" && m.MediaType != v1.MediaTypeImageManifest:
		return nil, wire.Errorf(CodeInvalid, "the manifest has the wrong mediaType")
	case m.ArtifactType != "" || m.Subject != nil:
		return nil, wire.Errorf(CodeUnsupported, "artifact manifests are not images")
	case m.Config.MediaType != v1.MediaTypeImageConfig:
		return nil, wire.Errorf(CodeUnsupported, "the manifest's config is not an OCI image config")
	case len(m.Layers) > maxLayers:
		return nil, wire.Errorf(CodeTooLarge, "the manifest has more than %d layers", maxLayers)
	}
	if err := checkDescriptor(m.Config, "config"); err != nil {
		return nil, err
	}
	for i, l := range m.Layers {
		if err := checkDescriptor(l, fmt.Sprintf("layer %d", i)); err != nil {
			return nil, err
		}
		if !layerTypes[l.MediaType] {
			return nil, wire.Errorf(CodeUnsupported, "layer %d has an unsupported media type (only tar and tar+gzip)", i)
		}
	}
	return &m, nil
}

// decodeConfig decodes and checks an image config (config.md). Unknown
// fields are tolerated; duplicates are not. The rootfs must be "layers"
// with one diff id per layer. Errors: CodeInvalid.
func decodeConfig(b []byte, layers int) (*v1.Image, error) {
	var c v1.Image
	if err := decodeStrict(b, &c, true); err != nil {
		return nil, wire.Wrap(CodeInvalid, "the image config does not decode", err)
	}
	switch {
	case c.OS == "" || c.Architecture == "":
		return nil, wire.Errorf(CodeInvalid, "the image config lacks os or architecture")
	case c.RootFS.Type != "layers":
		return nil, wire.Errorf(CodeInvalid, "the image config's rootfs type is not \"layers\"")
	case len(c.RootFS.DiffIDs) != layers:
		return nil, wire.Errorf(CodeInvalid, "the image config has %d diff ids for %d layers", len(c.RootFS.DiffIDs), layers)
	}
	for _, d := range c.RootFS.DiffIDs {
		if err := checkDigest(d, "a config diff id"); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

// checkDescriptor checks one descriptor's shape: a sha256 digest, a
// non-negative size, a media type, and none of the fields that would make
// content come from elsewhere (urls, embedded data).
func checkDescriptor(d v1.Descriptor, what string) error {
	if err := checkDigest(d.Digest, what); err != nil {
		return err
	}
	switch {
	case d.Size < 0:
		return wire.Errorf(CodeInvalid, "%s has a negative size", what)
	case d.MediaType == "" || strings.ContainsAny(d.MediaType, " \t\r\n"):
		return wire.Errorf(CodeInvalid, "%s has no valid media type", what)
	case len(d.URLs) > 0 || d.Data != nil:
		return wire.Errorf(CodeUnsupported, "%s names external urls or embeds data", what)
	}
	return nil
}

// refName is the tag annotation: informational only, never a selector.
func refName(d v1.Descriptor) string { return d.Annotations[v1.AnnotationRefName] }
