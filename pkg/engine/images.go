package engine

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// ImageOverrides replace the pinned image of some engine versions, by
// engine name and version: what a cluster that pulls from a private registry
// mirror, or runs images built on the machine, gives mydb-apiserver with
// --engine-image.
type ImageOverrides map[string]map[string]string

// imageReference is the shape of an image reference: a name of lowercase
// path components, optionally a registry host with a port, then a tag
// and/or a digest. (The full grammar is distribution's; this refuses what
// the kubelet would refuse only at pull time: spaces, upper case, empty
// parts.)
var imageReference = regexp.MustCompile(`^([a-zA-Z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)

// ParseImageOverrides reads values of the form ENGINE:VERSION=IMAGE, such
// as postgres:17=registry.example.com/postgres:17.6; the engine and the
// version must be ones mydb supports.
func ParseImageOverrides(values []string) (ImageOverrides, error) {
	out := ImageOverrides{}
	for _, v := range values {
		key, image, ok := strings.Cut(v, "=")
		name, version, ok2 := strings.Cut(key, ":")
		if !ok || !ok2 {
			return nil, fmt.Errorf("--engine-image %q must be ENGINE:VERSION=IMAGE", v)
		}
		e, found := Lookup(name)
		if !found {
			return nil, fmt.Errorf("--engine-image %q: engine must be one of %s", v, strings.Join(Names(), ", "))
		}
		if !e.Supports(version) {
			return nil, fmt.Errorf("--engine-image %q: %s version must be one of %s", v, name, strings.Join(e.Versions(), ", "))
		}
		if !imageReference.MatchString(image) {
			return nil, fmt.Errorf("--engine-image %q: %q is not an image reference", v, image)
		}
		if out[name] == nil {
			out[name] = map[string]string{}
		}
		if _, twice := out[name][version]; twice {
			return nil, fmt.Errorf("--engine-image %q: %s %s is given twice", v, name, version)
		}
		out[name][version] = image
	}
	return out, nil
}

// Image is the image that runs version of e: the override, else the
// pinned one.
func (o ImageOverrides) Image(e Spec, version string) string {
	if image, ok := o[e.Name][version]; ok {
		return image
	}
	return e.Images[version]
}

// ManagedImages are every image a database pod of mydb's may run: the
// instance image (its init container, and the dump servers) and each
// supported engine version's, after the overrides; sorted, each once. The
// ValidatingAdmissionPolicy that narrows mydb's own writes admits these
// alone (the policy mydb-apiserver-managed-images lists them).
func ManagedImages(instanceImage string, o ImageOverrides) []string {
	seen := map[string]bool{instanceImage: true}
	for _, name := range Names() {
		e, _ := Lookup(name)
		for _, version := range e.Versions() {
			seen[o.Image(e, version)] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
