package validation

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/pkg/core/api"
)

var (
	v137 = KubeVersion{37}
	v138 = KubeVersion{38}
)

// verdict is what one kube-apiserver minor says of an object.
type verdict struct {
	want []want
	warn []string
	// detail, when set, must be the message of the first error.
	detail string
}

// TestVersionRules holds every rule of versionRules at each supported
// minor, as kube-apiserver 1.37.2 and 1.38.0-beta.0 (pkg/apis/resource/
// validation) judge the same object.
func TestVersionRules(t *testing.T) {
	const twoTerms = d0 + ".nodeSelector.nodeSelectorTerms"
	perDevice := func(s *api.ResourceSlice) {
		s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr.To(true)
		s.Spec.Devices[1].AllNodes = ptr.To(true)
	}
	sliceCases := []struct {
		name   string
		mutate func(s *api.ResourceSlice)
		at     map[KubeVersion]verdict
	}{
		{name: "attribute name with two slashes", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Attributes["example.net/pci/root"] = strAttr("pci0000:00")
		}, at: map[KubeVersion]verdict{
			v137: {},
			v138: {want: []want{eInv(d0 + ".attributes[example.net/pci/root]")}, detail: "must not contain more than one slash"},
		}},
		{name: "capacity name with two slashes", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Capacity["example.net/hbm/0"] = api.DeviceCapacity{Value: q("1Gi")}
		}, at: map[KubeVersion]verdict{
			v137: {},
			v138: {want: []want{eInv(d0 + ".capacity[example.net/hbm/0]")}},
		}},
		{name: "device node selector with two terms", mutate: func(s *api.ResourceSlice) {
			perDevice(s)
			s.Spec.Devices[0].NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}, {}}}
		}, at: map[KubeVersion]verdict{
			v137: {warn: []string{twoTerms}},
			v138: {want: []want{eInv(twoTerms)}, detail: "must have exactly one node selector term"},
		}},
		{name: "device node selector with one term", mutate: func(s *api.ResourceSlice) {
			perDevice(s)
			s.Spec.Devices[0].NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
		}, at: map[KubeVersion]verdict{v137: {}, v138: {}}},
		{name: "version with a 19-digit number", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Attributes["driverVersion"] = api.DeviceAttribute{VersionValue: ptr.To("1.2.1234567890123456789")}
		}, at: map[KubeVersion]verdict{
			v137: {},
			v138: {want: []want{eInv(d0 + ".attributes[driverVersion].version")}, detail: semverDetail138},
		}},
		{name: "version with an 18-digit number and long build metadata", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Attributes["driverVersion"] = api.DeviceAttribute{VersionValue: ptr.To("1.2.123456789012345678+1234567890123456789")}
		}, at: map[KubeVersion]verdict{v137: {}, v138: {}}},
		{name: "version that is no semver", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].Attributes["driverVersion"] = api.DeviceAttribute{VersionValue: ptr.To("1.2")}
		}, at: map[KubeVersion]verdict{
			v137: {want: []want{eInv(d0 + ".attributes[driverVersion].version")}, detail: semverDetail137},
			v138: {want: []want{eInv(d0 + ".attributes[driverVersion].version")}, detail: semverDetail138},
		}},
		{name: "capacityKey that is no qualified name", mutate: func(s *api.ResourceSlice) {
			s.Spec.Devices[0].NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{
				"memory": {Mapping: &resourcev1.NodeAllocatableMapping{CapacityKey: ptr.To[api.QualifiedName]("bad key"), CapacityMultiplier: qp("1")}}}
		}, at: map[KubeVersion]verdict{
			v137: {want: []want{eNotFound(d0 + ".nodeAllocatableResources[memory].mapping.capacityKey")}},
			v138: {want: []want{eInv(d0 + ".nodeAllocatableResources[memory].mapping.capacityKey")}},
		}},
	}
	for _, tc := range sliceCases {
		for _, v := range Supported() {
			t.Run(tc.name+"/"+v.String(), func(t *testing.T) {
				s := plainSlice()
				tc.mutate(s)
				vd, ok := tc.at[v]
				if !ok {
					t.Fatalf("no verdict for %s", v)
				}
				errs := v.ResourceSlice(s)
				expectErrors(t, errs, vd.want...)
				expectDetail(t, errs, vd.detail)
				expectWarnings(t, v.ResourceSliceWarnings(s), vd.warn...)
			})
		}
	}

	const capName = "spec.devices.requests[0].exactly.capacity.requests"
	claims := []struct {
		name   string
		mutate func(c *resourcev1.ResourceClaim)
		at     map[KubeVersion]verdict
	}{
		{name: "capacity request name invalid", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).Capacity.Requests["bad name"] = q("1") },
			at: map[KubeVersion]verdict{
				v137: {warn: []string{capName + "[bad name]"}},
				v138: {want: []want{eInv(capName + "[bad name]")}},
			}},
		{name: "capacity request name with two slashes", mutate: func(c *resourcev1.ResourceClaim) { exactly(c).Capacity.Requests["example.net/hbm/0"] = q("1") },
			at: map[KubeVersion]verdict{
				v137: {},
				v138: {want: []want{eInv(capName + "[example.net/hbm/0]")}, detail: "must not contain more than one slash"},
			}},
	}
	for _, tc := range claims {
		for _, v := range Supported() {
			t.Run(tc.name+"/"+v.String(), func(t *testing.T) {
				c := validClaim()
				tc.mutate(c)
				vd := tc.at[v]
				errs := v.ResourceClaim(c)
				expectErrors(t, errs, vd.want...)
				expectDetail(t, errs, vd.detail)
				expectWarnings(t, v.ResourceClaimWarnings(c), vd.warn...)
			})
		}
	}
}

func expectDetail(t *testing.T, errs field.ErrorList, detail string) {
	t.Helper()
	if detail != "" && (len(errs) == 0 || errs[0].Detail != detail) {
		t.Errorf("detail: got %v, want %q", errs, detail)
	}
}

// TestVersionRulesCovered: every rule of the table is exercised by
// TestVersionRules' objects, so that none is a dead entry.
func TestVersionRulesCovered(t *testing.T) {
	seen := map[string]bool{}
	note := func(errs field.ErrorList, ws []Warning) {
		for _, e := range errs {
			seen[e.Origin] = true
		}
		for _, w := range ws {
			seen[w.origin] = true
		}
	}
	s := plainSlice()
	s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, ptr.To(true)
	s.Spec.Devices[1].AllNodes = ptr.To(true)
	d := &s.Spec.Devices[0]
	d.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}, {}}}
	d.Attributes["example.net/pci/root"] = strAttr("x")
	d.Attributes["v1"] = api.DeviceAttribute{VersionValue: ptr.To("1.2")}
	d.Attributes["v2"] = api.DeviceAttribute{VersionValue: ptr.To("1.2.1234567890123456789")}
	d.NodeAllocatableResources = map[corev1.ResourceName]resourcev1.NodeAllocatableResource{
		"memory": {Mapping: &resourcev1.NodeAllocatableMapping{CapacityKey: ptr.To[api.QualifiedName]("bad key"), CapacityMultiplier: qp("1")}}}
	note(resourceSlice(s), resourceSliceWarnings(s))
	c := validClaim()
	exactly(c).Capacity.Requests["bad name"] = q("1")
	note(resourceClaim(c), resourceClaimWarnings(c))
	for origin := range versionRules {
		if !seen[origin] {
			t.Errorf("version rule %s (%s) produced nothing", origin, versionRules[origin].what)
		}
	}
}

func TestRefusedBy(t *testing.T) {
	s := plainSlice()
	s.Spec.Devices[0].Attributes["example.net/pci/root"] = strAttr("x")
	s.Spec.Devices[0].Attributes["bad name"] = strAttr("x")
	var changed, always *field.Error
	for _, e := range ResourceSlice(s) {
		if strings.Contains(e.Field, "pci/root") {
			changed = e
		} else {
			always = e
		}
	}
	if changed == nil || always == nil {
		t.Fatalf("want one error of each kind, got %v", ResourceSlice(s))
	}
	if got := RefusedBy(changed); !slices.Equal(got, []KubeVersion{v138}) {
		t.Errorf("RefusedBy(two slashes) = %v, want [1.38]", got)
	}
	if got := AcceptedBy(changed); !slices.Equal(got, []KubeVersion{v137}) {
		t.Errorf("AcceptedBy(two slashes) = %v, want [1.37]", got)
	}
	if got := RefusedBy(always); got != nil {
		t.Errorf("RefusedBy(an error of every version) = %v, want nil", got)
	}
}

func TestParseKubeVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want KubeVersion
		err  string
	}{
		{in: "1.37", want: v137},
		{in: "v1.38", want: v138},
		{in: "1.37.2", want: v137},
		{in: "v1.38.0-beta.0", want: v138},
		{in: "v1.37.2+k3s1", want: v137},
		{in: "1.36", err: "kube-apiserver 1.36: dractl validates for 1.37, 1.38"},
		{in: "1.39.0", err: "kube-apiserver 1.39: dractl validates for 1.37, 1.38"},
		{in: "2.0", err: `expected a Kubernetes version such as 1.38, found "2.0"`},
		{in: "latest", err: `expected a Kubernetes version such as 1.38, found "latest"`},
		{in: "1.", err: `expected a Kubernetes version such as 1.38, found "1."`},
	} {
		got, err := ParseKubeVersion(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseKubeVersion(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseKubeVersion(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestKubeMinors: any 1.x minor is read, and the rules nearest to one
// dractl has none of are the oldest supported minor's for an older server
// and the newest's for a newer one.
func TestKubeMinors(t *testing.T) {
	for _, tc := range []struct {
		in             string
		minor, nearest int
		supported      bool
	}{
		{"v1.33.5", 33, 37, false},
		{"v1.36.3", 36, 37, false},
		{"1.37", 37, 37, true},
		{"v1.38.0-beta.0", 38, 38, true},
		{"v1.39.0", 39, 38, false},
	} {
		v, err := ParseKubeMinor(tc.in)
		if err != nil || v.Minor != tc.minor || v.Supported() != tc.supported || v.Nearest().Minor != tc.nearest {
			t.Errorf("ParseKubeMinor(%q) = %v, %v (supported %v, nearest %v); want 1.%d (supported %v, nearest 1.%d)",
				tc.in, v, err, v.Supported(), v.Nearest(), tc.minor, tc.supported, tc.nearest)
		}
	}
	if _, err := ParseKubeMinor("v2.0.0"); err == nil {
		t.Error("ParseKubeMinor(v2.0.0) succeeded")
	}
}

// TestServerKubeVersion: a server's API is its emulation version's, and
// its gitVersion's when it reports none (older than 1.31).
func TestServerKubeVersion(t *testing.T) {
	for _, tc := range []struct {
		info version.Info
		want int
		err  string
	}{
		{info: version.Info{GitVersion: "v1.37.2", EmulationMajor: "1", EmulationMinor: "37"}, want: 37},
		{info: version.Info{GitVersion: "v1.38.0-beta.0", EmulationMajor: "1", EmulationMinor: "37"}, want: 37},
		{info: version.Info{GitVersion: "v0.0.0-master+$Format:%H$", EmulationMajor: "1", EmulationMinor: "37"}, want: 37},
		{info: version.Info{GitVersion: "v1.30.14"}, want: 30},
		{info: version.Info{GitVersion: "v0.0.0-master+$Format:%H$"}, err: `expected a Kubernetes version such as 1.38, found "v0.0.0-master+$Format:%H$"`},
		{info: version.Info{GitVersion: "v1.37.2", EmulationMajor: "1", EmulationMinor: "x"}, err: "kube-apiserver v1.37.2: emulation version: expected"},
	} {
		v, err := ServerKubeVersion(&tc.info)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ServerKubeVersion(%+v) = %v, %v; want error %q", tc.info, v, err, tc.err)
			}
			continue
		}
		if err != nil || v.Minor != tc.want {
			t.Errorf("ServerKubeVersion(%+v) = %v, %v; want 1.%d", tc.info, v, err, tc.want)
		}
	}
}
