package validation

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"

	"github.com/dractl/dractl/pkg/core/api"
)

// KubeVersion is a Kubernetes minor release whose kube-apiserver dractl
// validates as: 1.Minor.
type KubeVersion struct{ Minor int }

// The kube-apiserver minors dractl judges objects for, oldest first; the
// last is the default of every verb that takes --kube-version.
var supported = []KubeVersion{{37}, {38}}

// Supported returns the minors dractl validates for, oldest first.
func Supported() []KubeVersion { return slices.Clone(supported) }

// Newest is the newest supported minor, the one validation judges for
// when no version is named.
func Newest() KubeVersion { return supported[len(supported)-1] }

func (v KubeVersion) String() string { return fmt.Sprintf("1.%d", v.Minor) }

// SupportedList is the supported minors for messages: "1.37, 1.38".
func SupportedList() string {
	names := make([]string, len(supported))
	for i, v := range supported {
		names[i] = v.String()
	}
	return strings.Join(names, ", ")
}

// ParseKubeVersion reads a minor as a user writes it ("1.38") or as
// kube-apiserver reports its gitVersion ("v1.38.0-beta.0", "v1.37.2+k3s1").
// Minors dractl has no rules for are an error naming the supported ones.
func ParseKubeVersion(s string) (KubeVersion, error) {
	v, err := ParseKubeMinor(s)
	if err != nil {
		return KubeVersion{}, err
	}
	if !v.Supported() {
		return KubeVersion{}, fmt.Errorf("kube-apiserver %s: dractl validates for %s", v, SupportedList())
	}
	return v, nil
}

// ParseKubeMinor reads any Kubernetes 1.x minor the way ParseKubeVersion
// does, whether dractl has rules for it or not.
func ParseKubeMinor(s string) (KubeVersion, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "v")
	major, rest, ok := strings.Cut(t, ".")
	minorText := rest
	if i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorText = rest[:i]
	}
	minor, err := strconv.Atoi(minorText)
	if !ok || major != "1" || err != nil {
		return KubeVersion{}, fmt.Errorf("expected a Kubernetes version such as %s, found %q", Newest(), s)
	}
	return KubeVersion{minor}, nil
}

// Supported reports whether dractl has the rules of kube-apiserver v.
func (v KubeVersion) Supported() bool { return slices.Contains(supported, v) }

// Nearest is the supported minor whose rules are nearest to v's: v itself
// when supported, the oldest supported for an older minor, the newest for
// a newer one.
func (v KubeVersion) Nearest() KubeVersion {
	switch {
	case v.Minor < supported[0].Minor:
		return supported[0]
	case v.Minor > Newest().Minor:
		return Newest()
	}
	return v
}

// ServerKubeVersion is the minor whose API a kube-apiserver serves, from
// what it reports at /version: its emulation version when it reports one
// (1.31 and newer; a server run with --emulated-version serves the API of
// that minor), its gitVersion otherwise. A build without a version stamp
// (v0.0.0-master) reports its minor only as the emulation version.
func ServerKubeVersion(info *version.Info) (KubeVersion, error) {
	if info.EmulationMajor != "" || info.EmulationMinor != "" {
		v, err := ParseKubeMinor(info.EmulationMajor + "." + info.EmulationMinor)
		if err != nil {
			return KubeVersion{}, fmt.Errorf("kube-apiserver %s: emulation version: %w", info.GitVersion, err)
		}
		return v, nil
	}
	return ParseKubeMinor(info.GitVersion)
}

// A versionRule is a rule of kube-apiserver's resource.k8s.io validation
// that not every supported minor makes: errors and warnings it produces
// carry its origin, and a version keeps them only within [from, to]
// (a zero bound is open). The rules come from the difference of
// k8s.io/kubernetes pkg/apis/resource/validation between releases.
type versionRule struct {
	from, to int
	// what is the rule in a few words, for docs and tests.
	what string
}

// Origins of the rules that differ between the supported minors. One table:
// every check that depends on the version tags its errors with one of these
// (field.Error.Origin, Warning.origin).
const (
	// A qualified name (attribute, capacity, counter name) with more than
	// one slash: 1.37 stores it unchecked, 1.38 refuses it.
	originNameSlashes = "dractl:qualified-name-one-slash"
	// A per-device nodeSelector with more than one term: 1.38 refuses it,
	// as it does for the slice's own selector; 1.37 accepts it (a warning).
	originDeviceSelectorTerms     = "dractl:device-node-selector-one-term"
	originDeviceSelectorTermsWarn = "dractl:device-node-selector-terms-warning"
	// Version attribute values: 1.38 allows at most 18 digits in a number
	// (so that it fits an int64), and says so in its message.
	originSemverDigits   = "dractl:semver-18-digits"
	originSemverWords137 = "dractl:semver-words-1.37"
	originSemverWords138 = "dractl:semver-words-1.38"
	// Capacity request names of a claim: 1.38 validates them as qualified
	// names; 1.37 does not (a warning).
	originClaimCapacityNames     = "dractl:claim-capacity-names"
	originClaimCapacityNamesWarn = "dractl:claim-capacity-names-warning"
	// nodeAllocatableResources[].mapping.capacityKey that is no qualified
	// name: 1.38 reports the format, 1.37 only that no capacity has it.
	originCapacityKeyFormat   = "dractl:capacity-key-format"
	originCapacityKeyNotFound = "dractl:capacity-key-not-found"
)

var versionRules = map[string]versionRule{
	originNameSlashes:             {from: 38, what: "qualified names with more than one slash refused"},
	originDeviceSelectorTerms:     {from: 38, what: "per-device node selectors with more than one term refused"},
	originDeviceSelectorTermsWarn: {to: 37, what: "per-device node selectors with more than one term accepted with a warning"},
	originSemverDigits:            {from: 38, what: "numbers in version attributes limited to 18 digits"},
	originSemverWords137:          {to: 37, what: "1.37's words for a version attribute that is no semver"},
	originSemverWords138:          {from: 38, what: "1.38's words for a version attribute that is no semver"},
	originClaimCapacityNames:      {from: 38, what: "capacity request names of claims validated"},
	originClaimCapacityNamesWarn:  {to: 37, what: "capacity request names of claims accepted with a warning"},
	originCapacityKeyFormat:       {from: 38, what: "a capacityKey that is no qualified name reported as such"},
	originCapacityKeyNotFound:     {to: 37, what: "a capacityKey that is no qualified name reported as not found"},
}

// makes reports whether kube-apiserver v applies the rule of origin;
// errors of no version rule apply at every version.
func (v KubeVersion) makes(origin string) bool {
	r, ok := versionRules[origin]
	if !ok {
		return true
	}
	return v.Within(r.from, r.to)
}

// Within reports whether v's minor is from..to, both included; a zero
// bound leaves that side open. Every table of per-minor rules (this
// package's, the allocator's) decides by it.
func (v KubeVersion) Within(from, to int) bool {
	return (from == 0 || v.Minor >= from) && (to == 0 || v.Minor <= to)
}

// judge keeps the errors kube-apiserver v makes. The lists the checks
// produce hold every version's variant of a rule; judge picks v's.
func (v KubeVersion) judge(errs field.ErrorList) field.ErrorList {
	out := errs[:0:0]
	for _, e := range errs {
		if v.makes(e.Origin) {
			out = append(out, e)
		}
	}
	return out
}

func (v KubeVersion) judgeWarnings(ws []Warning) []Warning {
	out := ws[:0:0]
	for _, w := range ws {
		if v.makes(w.origin) {
			out = append(out, w)
		}
	}
	return out
}

// RefusedBy returns the supported minors that make the error when not all
// of them do (a rule that changed between releases), and nil otherwise.
func RefusedBy(e *field.Error) []KubeVersion {
	if _, ok := versionRules[e.Origin]; !ok {
		return nil
	}
	var by []KubeVersion
	for _, v := range supported {
		if v.makes(e.Origin) {
			by = append(by, v)
		}
	}
	if len(by) == len(supported) {
		return nil
	}
	return by
}

// AcceptedBy is the complement of RefusedBy: the supported minors that
// store the object as far as this error goes.
func AcceptedBy(e *field.Error) []KubeVersion {
	by := RefusedBy(e)
	if by == nil {
		return nil
	}
	var out []KubeVersion
	for _, v := range supported {
		if !slices.Contains(by, v) {
			out = append(out, v)
		}
	}
	return out
}

// ResourceSlices validates each slice like ResourceSlice, spread over
// GOMAXPROCS workers. The result holds the errors of slices[i] at index i,
// whatever the scheduling.
func ResourceSlices(ss []*api.ResourceSlice) []field.ErrorList { return Newest().ResourceSlices(ss) }

// ResourceSlice validates a ResourceSlice as the newest supported
// kube-apiserver's admission would on create (KubeVersion.ResourceSlice
// for another). A slice that sets no KEP-5234 field is accepted exactly
// when that kube-apiserver with all DRA feature gates enabled accepts it;
// rules of the seeds it does not enforce are left to
// ResourceSliceWarnings. A slice that uses mixins is validated against the
// slice-wide limits of KEP-5234 (KEP-5234 "Limits") instead of the
// per-object limits they replace. The result is deterministic: map entries
// are visited in key order.
func ResourceSlice(s *api.ResourceSlice) field.ErrorList { return Newest().ResourceSlice(s) }

// DeviceClass validates a DeviceClass as the newest supported
// kube-apiserver would on create: name, selectors (each must compile as a
// DRA CEL selector), opaque configuration and the extended resource name.
func DeviceClass(c *resourcev1.DeviceClass) field.ErrorList { return Newest().DeviceClass(c) }

// ResourceClaim validates a ResourceClaim as the newest supported
// kube-apiserver would on create (see resourceClaim).
func ResourceClaim(c *resourcev1.ResourceClaim) field.ErrorList { return Newest().ResourceClaim(c) }

// ResourceClaimTemplate validates a template as the newest supported
// kube-apiserver would on create (see resourceClaimTemplate).
func ResourceClaimTemplate(t *resourcev1.ResourceClaimTemplate) field.ErrorList {
	return Newest().ResourceClaimTemplate(t)
}

// ResourceSliceWarnings reports what the newest supported kube-apiserver
// accepts although the seeds advise against it (see resourceSliceWarnings).
func ResourceSliceWarnings(s *api.ResourceSlice) []Warning { return Newest().ResourceSliceWarnings(s) }

// ResourceClaimWarnings reports what the newest supported kube-apiserver
// accepts in a claim although it cannot work as written (see
// resourceClaimWarnings).
func ResourceClaimWarnings(c *resourcev1.ResourceClaim) []Warning {
	return Newest().ResourceClaimWarnings(c)
}

// ResourceClaimTemplateWarnings is ResourceClaimWarnings for the claim
// spec of a template.
func ResourceClaimTemplateWarnings(t *resourcev1.ResourceClaimTemplate) []Warning {
	return Newest().ResourceClaimTemplateWarnings(t)
}

// ResourceSlices is ResourceSlices as kube-apiserver v judges.
func (v KubeVersion) ResourceSlices(ss []*api.ResourceSlice) []field.ErrorList {
	out := resourceSlices(ss)
	for i := range out {
		out[i] = v.judge(out[i])
	}
	return out
}

// ResourceSlice is ResourceSlice as kube-apiserver v judges.
func (v KubeVersion) ResourceSlice(s *api.ResourceSlice) field.ErrorList {
	return v.judge(resourceSlice(s))
}

// DeviceClass is DeviceClass as kube-apiserver v judges.
func (v KubeVersion) DeviceClass(c *resourcev1.DeviceClass) field.ErrorList {
	return v.judge(deviceClass(c))
}

// ResourceClaim is ResourceClaim as kube-apiserver v judges.
func (v KubeVersion) ResourceClaim(c *resourcev1.ResourceClaim) field.ErrorList {
	return v.judge(resourceClaim(c))
}

// ResourceClaimTemplate is ResourceClaimTemplate as kube-apiserver v judges.
func (v KubeVersion) ResourceClaimTemplate(t *resourcev1.ResourceClaimTemplate) field.ErrorList {
	return v.judge(resourceClaimTemplate(t))
}

// ResourceSliceWarnings is ResourceSliceWarnings for kube-apiserver v:
// what v refuses is an error there, not a warning.
func (v KubeVersion) ResourceSliceWarnings(s *api.ResourceSlice) []Warning {
	return v.judgeWarnings(resourceSliceWarnings(s))
}

// ResourceClaimWarnings is ResourceClaimWarnings for kube-apiserver v.
func (v KubeVersion) ResourceClaimWarnings(c *resourcev1.ResourceClaim) []Warning {
	return v.judgeWarnings(resourceClaimWarnings(c))
}

// ResourceClaimTemplateWarnings is ResourceClaimTemplateWarnings for
// kube-apiserver v.
func (v KubeVersion) ResourceClaimTemplateWarnings(t *resourcev1.ResourceClaimTemplate) []Warning {
	return v.judgeWarnings(resourceClaimTemplateWarnings(t))
}
