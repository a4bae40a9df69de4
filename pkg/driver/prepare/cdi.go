package prepare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// cdiSpecs writes one transient CDI spec per claim. Its device names carry
// the claim UID, so a runtime that cached an older spec never resolves a
// new claim's device to it.
type cdiSpecs struct {
	cache         *cdiapi.Cache
	dir           string
	vendor, class string
}

func newCDISpecs(dir, vendor, class string) (*cdiSpecs, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("CDI spec directory: %w", err)
	}
	if err := parser.ValidateVendorName(vendor); err != nil {
		return nil, fmt.Errorf("CDI vendor %q (the driver name): %w", vendor, err)
	}
	if err := parser.ValidateClassName(class); err != nil {
		return nil, fmt.Errorf("CDI class %q: %w", class, err)
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("CDI cache: %w", err)
	}
	return &cdiSpecs{cache: cache, dir: dir, vendor: vendor, class: class}, nil
}

func (c *cdiSpecs) specName(claim types.UID) string {
	return cdiapi.GenerateTransientSpecName(c.vendor, c.class, string(claim))
}

func (c *cdiSpecs) deviceName(claim types.UID, device string) string {
	return string(claim) + "-" + device
}

// requestName is the name of the CDI device holding a request's edits
// (RequestEditsProfile). "_" appears in no DRA device name, so it never
// collides with a device's.
func (c *cdiSpecs) requestName(claim types.UID, request string) string {
	return string(claim) + "_" + request
}

// qualified is the fully qualified CDI device ID of a device of the spec.
func (c *cdiSpecs) qualified(name string) string {
	return parser.QualifiedName(c.vendor, c.class, name)
}

// write replaces the claim's spec with the given CDI devices.
func (c *cdiSpecs) write(claim types.UID, devices []cdispec.Device) error {
	spec := &cdispec.Spec{Kind: c.vendor + "/" + c.class, Devices: devices}
	v, err := cdiapi.MinimumRequiredVersion(spec)
	if err != nil {
		return fmt.Errorf("CDI spec version: %w", err)
	}
	spec.Version = v
	if err := c.cache.WriteSpec(spec, c.specName(claim)); err != nil {
		return fmt.Errorf("write CDI spec of claim %s: %w", claim, err)
	}
	return nil
}

func (c *cdiSpecs) remove(claim types.UID) error {
	if err := c.cache.RemoveSpec(c.specName(claim)); err != nil {
		return fmt.Errorf("remove CDI spec of claim %s: %w", claim, err)
	}
	return nil
}

func (c *cdiSpecs) path(claim types.UID) string {
	return filepath.Join(c.dir, c.specName(claim)+".yaml")
}

// current reports whether the claim's spec on disk is the one with these
// devices: there, readable, of this kind, with the same edits. Both sides
// go through JSON, so that what YAML cannot tell apart (an empty list and
// none) compares equal.
func (c *cdiSpecs) current(claim types.UID, devices []cdispec.Device) bool {
	data, err := os.ReadFile(c.path(claim))
	if err != nil {
		return false
	}
	var onDisk cdispec.Spec
	if err := yaml.UnmarshalStrict(data, &onDisk); err != nil || onDisk.Kind != c.vendor+"/"+c.class {
		return false
	}
	have, err1 := json.Marshal(onDisk.Devices)
	want, err2 := json.Marshal(devices)
	return err1 == nil && err2 == nil && bytes.Equal(have, want)
}

// claims lists the claims that have a spec of this vendor and class.
func (c *cdiSpecs) claims() ([]types.UID, error) {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, err
	}
	prefix := c.specName("")
	var out []types.UID
	for _, e := range entries {
		name := e.Name()
		if ext := filepath.Ext(name); ext != ".yaml" && ext != ".json" || !strings.HasPrefix(name, prefix) {
			continue
		}
		out = append(out, types.UID(strings.TrimSuffix(strings.TrimPrefix(name, prefix), filepath.Ext(name))))
	}
	return out, nil
}

// MakeCharDevice makes a character device node at path with the given
// numbers (and its directory), unless one with those numbers is there; a
// file of another kind or number is replaced. Simulated GPUs use it for
// the nodes their CDI edits name by host path, from which a container
// runtime reads the numbers as it does for a real device. It takes
// CAP_MKNOD.
func MakeCharDevice(path string, major, minor uint32) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	dev := unix.Mkdev(major, minor)
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == dev {
			return nil
		}
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	if err := unix.Mknod(path, unix.S_IFCHR|0o600, int(dev)); err != nil {
		return fmt.Errorf("device node: mknod %s c %d %d (needs CAP_MKNOD): %w", path, major, minor, err)
	}
	return nil
}

// hostDeviceNodes checks that every device node the CDI devices name by
// host path exists on the host as a device: the runtime reads its numbers
// there when it creates the container, and one that is missing (the
// kernel driver not loaded, a node removed) would fail the container's
// creation after the claim was reported prepared. Nodes given with their
// numbers are made by the runtime and not looked up.
func hostDeviceNodes(devices []cdispec.Device) error {
	for _, d := range devices {
		for _, n := range d.ContainerEdits.DeviceNodes {
			if n.Type != "" && (n.Major != 0 || n.Type == "p") {
				continue
			}
			host := n.HostPath
			if host == "" {
				host = n.Path
			}
			var st unix.Stat_t
			if err := unix.Stat(host, &st); err != nil {
				return fmt.Errorf("CDI device %s: device node %s is not on this host (%s): %w", d.Name, n.Path, host, err)
			}
			if m := st.Mode & unix.S_IFMT; m != unix.S_IFCHR && m != unix.S_IFBLK {
				return fmt.Errorf("CDI device %s: device node %s: %s on this host is not a device", d.Name, n.Path, host)
			}
		}
	}
	return nil
}
