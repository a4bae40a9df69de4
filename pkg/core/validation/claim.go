package validation

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	dracel "github.com/dractl/dractl/pkg/core/cel"
)

// deviceClass validates a DeviceClass as admission would on create:
// name, selectors (each must compile as a DRA CEL selector), opaque
// configuration and the extended resource name.
func deviceClass(c *resourcev1.DeviceClass) field.ErrorList {
	if c == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "no DeviceClass given")}
	}
	errs := objectMeta(&c.ObjectMeta, false, field.NewPath("metadata"))
	p := field.NewPath("spec")
	errs = append(errs, selectors(c.Spec.Selectors, p.Child("selectors"))...)
	configPath := p.Child("config")
	if e := tooMany(configPath, len(c.Spec.Config), MaxConfigs); e != nil {
		errs = append(errs, e...)
	} else {
		for i := range c.Spec.Config {
			errs = append(errs, deviceConfiguration(&c.Spec.Config[i].DeviceConfiguration, configPath.Index(i))...)
		}
	}
	if n := c.Spec.ExtendedResourceName; n != nil && !IsExtendedResourceName(*n) {
		errs = append(errs, field.Invalid(p.Child("extendedResourceName"), *n, "must be a valid extended resource name"))
	}
	return errs
}

// IsExtendedResourceName reports whether name is an extended resource
// name: domain-prefixed, outside kubernetes.io, and still a qualified name
// once quota's "requests." prefix is added (the rule of core's
// v1helper.IsExtendedResourceName). DeviceClass admission and the pods'
// extended resources that DRA may serve (pkg/core/podclaims) both follow it.
func IsExtendedResourceName(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, corev1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(name, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+name)) == 0
}

// resourceClaim validates a ResourceClaim's metadata and spec as admission
// would on create. The status is not validated: kube-apiserver drops it on
// create (ResourceClaimWarnings looks at it). An empty namespace is accepted (clients fill it in); the object is
// validated as API-server defaulting would leave it, so an unset
// allocationMode means ExactCount and an unset count means one.
func resourceClaim(c *resourcev1.ResourceClaim) field.ErrorList {
	if c == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "no ResourceClaim given")}
	}
	errs := objectMeta(&c.ObjectMeta, true, field.NewPath("metadata"))
	names := gatherRequestNames(&c.Spec.Devices)
	return append(errs, deviceClaim(&c.Spec.Devices, names, field.NewPath("spec", "devices"))...)
}

// resourceClaimTemplate validates a template: its own metadata, the
// claim metadata it stamps out (only labels and annotations may be set)
// and the claim spec.
func resourceClaimTemplate(t *resourcev1.ResourceClaimTemplate) field.ErrorList {
	if t == nil {
		return field.ErrorList{field.Required(field.NewPath("spec"), "no ResourceClaimTemplate given")}
	}
	errs := objectMeta(&t.ObjectMeta, true, field.NewPath("metadata"))
	p := field.NewPath("spec")
	errs = append(errs, templateObjectMeta(&t.Spec.ObjectMeta, p.Child("metadata"))...)
	names := gatherRequestNames(&t.Spec.Spec.Devices)
	errs = append(errs, deviceClaim(&t.Spec.Spec.Devices, names, p.Child("spec", "devices"))...)
	return errs
}

func templateObjectMeta(m *metav1.ObjectMeta, p *field.Path) field.ErrorList {
	errs := apivalidation.ValidateAnnotations(m.Annotations, p.Child("annotations"))
	errs = append(errs, metav1validation.ValidateLabels(m.Labels, p.Child("labels"))...)
	const msg = "cannot be set"
	forbid := func(set bool, name string) {
		if set {
			errs = append(errs, field.Forbidden(p.Child(name), msg))
		}
	}
	forbid(m.Name != "", "name")
	forbid(m.GenerateName != "", "generateName")
	forbid(m.Namespace != "", "namespace")
	forbid(m.UID != "", "uid")
	forbid(m.ResourceVersion != "", "resourceVersion")
	forbid(m.Generation != 0, "generation")
	forbid(!m.CreationTimestamp.IsZero(), "creationTimestamp")
	forbid(m.DeletionTimestamp != nil, "deletionTimestamp")
	forbid(m.DeletionGracePeriodSeconds != nil, "deletionGracePeriodSeconds")
	forbid(len(m.OwnerReferences) > 0, "ownerReferences")
	forbid(len(m.Finalizers) > 0, "finalizers")
	forbid(len(m.ManagedFields) > 0, "managedFields")
	return errs
}

// requestNames maps each request name to its subrequest names (nil for a
// request with exactly).
type requestNames map[string]map[string]bool

func gatherRequestNames(dc *resourcev1.DeviceClaim) requestNames {
	names := make(requestNames, len(dc.Requests))
	for _, r := range dc.Requests {
		var subs map[string]bool
		if len(r.FirstAvailable) > 0 {
			subs = make(map[string]bool, len(r.FirstAvailable))
			for _, s := range r.FirstAvailable {
				subs[s.Name] = true
			}
		}
		names[r.Name] = subs
	}
	return names
}

// has accepts "request" and "request/subrequest".
func (n requestNames) has(ref string) bool {
	req, sub, isSub := strings.Cut(ref, "/")
	subs, ok := n[req]
	if !ok {
		return false
	}
	return !isSub || subs[sub]
}

const requestRefDetail = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"

func requestRef(ref string, names requestNames, p *field.Path) field.ErrorList {
	segments := strings.Split(ref, "/")
	if len(segments) > 2 {
		return field.ErrorList{field.Invalid(p, ref, requestRefDetail)}
	}
	var errs field.ErrorList
	for _, s := range segments {
		errs = append(errs, dnsLabel(s, p)...)
	}
	if len(errs) == 0 && !names.has(ref) {
		errs = append(errs, field.Invalid(p, ref, requestRefDetail))
	}
	return errs
}

func requestRefs(refs []string, names requestNames, p *field.Path) field.ErrorList {
	if e := tooMany(p, len(refs), MaxRequests); e != nil {
		return e
	}
	var errs field.ErrorList
	for i, r := range refs {
		errs = append(errs, requestRef(r, names, p.Index(i))...)
	}
	return append(errs, stringDuplicates(refs, p)...)
}

func deviceClaim(dc *resourcev1.DeviceClaim, names requestNames, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	cc := &claimCheck{used: constraintAttributes(dc.Constraints)}
	reqPath := p.Child("requests")
	if e := tooMany(reqPath, len(dc.Requests), MaxRequests); e != nil {
		errs = append(errs, e...)
	} else {
		for i := range dc.Requests {
			errs = append(errs, deviceRequest(&dc.Requests[i], cc, reqPath.Index(i))...)
		}
		if cc.derivedCost > MaxDerivedAttributesCost {
			errs = append(errs, field.Forbidden(p, "too complex, total cost of derived attribute CEL expressions in the claim exceeds cost limit"))
		}
		errs = append(errs, duplicates(dc.Requests, func(r *resourcev1.DeviceRequest) string { return r.Name }, reqPath)...)
	}
	conPath := p.Child("constraints")
	if e := tooMany(conPath, len(dc.Constraints), MaxConstraints); e != nil {
		errs = append(errs, e...)
	} else {
		for i := range dc.Constraints {
			errs = append(errs, constraint(&dc.Constraints[i], names, conPath.Index(i))...)
		}
	}
	cfgPath := p.Child("config")
	if e := tooMany(cfgPath, len(dc.Config), MaxConfigs); e != nil {
		errs = append(errs, e...)
	} else {
		for i := range dc.Config {
			cp := cfgPath.Index(i)
			errs = append(errs, requestRefs(dc.Config[i].Requests, names, cp.Child("requests"))...)
			errs = append(errs, deviceConfiguration(&dc.Config[i].DeviceConfiguration, cp)...)
		}
	}
	return errs
}

// claimCheck is what the checks of one claim's requests share.
type claimCheck struct {
	used constraintUse
	// derivedCost adds up the estimated cost of every derived attribute
	// expression of the claim.
	derivedCost uint64
}

func deviceRequest(r *resourcev1.DeviceRequest, cc *claimCheck, p *field.Path) field.ErrorList {
	errs := dnsLabel(r.Name, p.Child("name"))
	const detail = "exactly one of `exactly` or `firstAvailable` is required"
	hasExactly, hasFirst := r.Exactly != nil, len(r.FirstAvailable) > 0
	switch {
	case !hasExactly && !hasFirst:
		errs = append(errs, field.Required(p, detail))
	case hasExactly && hasFirst:
		errs = append(errs, field.Invalid(p, "{`exactly`, `firstAvailable`}", detail+", but multiple fields are set"))
	case hasExactly:
		e := r.Exactly
		ep := p.Child("exactly")
		errs = append(errs, requestCommon(e.DeviceClassName, e.Selectors, e.AllocationMode, e.Count, e.Tolerations, ep)...)
		errs = append(errs, derivedAttributes(e.DerivedAttributes, cc, r.Name, ep.Child("derivedAttributes"))...)
		errs = append(errs, capacityRequestNames(e.Capacity, ep)...)
	default:
		fp := p.Child("firstAvailable")
		if e := tooMany(fp, len(r.FirstAvailable), MaxSubRequests); e != nil {
			return append(errs, e...)
		}
		for i := range r.FirstAvailable {
			s := &r.FirstAvailable[i]
			sp := fp.Index(i)
			errs = append(errs, dnsLabel(s.Name, sp.Child("name"))...)
			errs = append(errs, requestCommon(s.DeviceClassName, s.Selectors, s.AllocationMode, s.Count, s.Tolerations, sp)...)
			errs = append(errs, derivedAttributes(s.DerivedAttributes, cc, r.Name+"/"+s.Name, sp.Child("derivedAttributes"))...)
			errs = append(errs, capacityRequestNames(s.Capacity, sp)...)
		}
		errs = append(errs, duplicates(r.FirstAvailable, func(s *resourcev1.DeviceSubRequest) string { return s.Name }, fp)...)
	}
	return errs
}

var allocationModes = []resourcev1.DeviceAllocationMode{resourcev1.DeviceAllocationModeAll, resourcev1.DeviceAllocationModeExactCount}

// requestCommon holds the rules that exactly and firstAvailable entries
// share.
func requestCommon(class string, sels []resourcev1.DeviceSelector, mode resourcev1.DeviceAllocationMode, count int64,
	tols []resourcev1.DeviceToleration, p *field.Path) field.ErrorList {
	errs := dnsSubdomain(class, p.Child("deviceClassName"))
	errs = append(errs, selectors(sels, p.Child("selectors"))...)
	switch mode {
	case resourcev1.DeviceAllocationModeAll:
		if count != 0 {
			errs = append(errs, field.Invalid(p.Child("count"), count, "must not be specified when allocationMode is 'All'"))
		}
	case resourcev1.DeviceAllocationModeExactCount:
		if count <= 0 {
			errs = append(errs, field.Invalid(p.Child("count"), count, "must be greater than zero"))
		}
	case "":
		// Defaulting turns this into ExactCount and a zero count into one.
		if count < 0 {
			errs = append(errs, field.Invalid(p.Child("count"), count, "must be greater than zero"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("allocationMode"), mode, allocationModes))
	}
	tp := p.Child("tolerations")
	if e := tooMany(tp, len(tols), MaxTolerations); e != nil {
		errs = append(errs, e...)
	} else {
		for i := range tols {
			errs = append(errs, toleration(&tols[i], tp.Index(i))...)
		}
	}
	return errs
}

// capacityRequestNames: kube-apiserver 1.38 checks that the names of
// capacity requests are qualified names; 1.37 checks nothing of them, and
// ResourceClaimWarnings points out the ones that cannot work there.
func capacityRequestNames(c *resourcev1.CapacityRequirements, p *field.Path) field.ErrorList {
	if c == nil {
		return nil
	}
	var errs field.ErrorList
	cp := p.Child("capacity", "requests")
	for _, name := range sortedKeys(c.Requests) {
		kp := keyPath(cp, string(name), qualifiedKeyMaxPathLength)
		errs = append(errs, qualifiedName(string(name), kp).WithOrigin(originClaimCapacityNames)...)
	}
	return errs
}

var tolerationOperators = []resourcev1.DeviceTolerationOperator{resourcev1.DeviceTolerationOpEqual, resourcev1.DeviceTolerationOpExists}

// toleration: optional key (a label name); Exists forbids a value, Equal
// (the default) needs a valid label value; effect optional but known.
func toleration(t *resourcev1.DeviceToleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, labelName(t.Key, p.Child("key"))...)
	}
	switch t.Operator {
	case resourcev1.DeviceTolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty for operator `Exists`"))
		}
	case resourcev1.DeviceTolerationOpEqual, "":
		// An unset operator is defaulted to Equal.
		errs = append(errs, labelValue(t.Value, p.Child("value"))...)
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, tolerationOperators))
	}
	return append(errs, taintEffect(t.Effect, false, p.Child("effect"))...)
}

func selectors(sels []resourcev1.DeviceSelector, p *field.Path) field.ErrorList {
	if e := tooMany(p, len(sels), MaxSelectors); e != nil {
		return e
	}
	var errs field.ErrorList
	for i := range sels {
		sp := p.Index(i)
		if sels[i].CEL == nil {
			errs = append(errs, field.Required(sp.Child("cel"), ""))
			continue
		}
		errs = append(errs, celSelector(sels[i].CEL.Expression, sp.Child("cel", "expression"))...)
	}
	return errs
}

// celSelector compiles the expression in dractl's DRA CEL environment,
// which applies the same length, type and cost rules as kube-apiserver.
func celSelector(expr string, p *field.Path) field.ErrorList {
	if expr == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if len(expr) > CELExpressionMaxLength {
		// Too long to be worth compiling.
		return field.ErrorList{field.TooLong(p, expr, CELExpressionMaxLength)}
	}
	if _, err := dracel.Default().Compile(expr); err != nil {
		var ce *dracel.CompileError
		if errors.As(err, &ce) {
			return field.ErrorList{ce.FieldError(p)}
		}
		return field.ErrorList{field.InternalError(p, err)}
	}
	return nil
}

// constraintUse maps "" (all requests), "req" or "req/sub" to the
// attribute names that constraints on them use.
type constraintUse map[string]map[string]bool

func constraintAttributes(cs []resourcev1.DeviceConstraint) constraintUse {
	use := constraintUse{}
	add := func(key, attr string) {
		if use[key] == nil {
			use[key] = map[string]bool{}
		}
		use[key][attr] = true
	}
	for _, c := range cs {
		var attr string
		switch {
		case c.MatchAttribute != nil:
			attr = string(*c.MatchAttribute)
		case c.DistinctAttribute != nil:
			attr = string(*c.DistinctAttribute)
		default:
			continue
		}
		if len(c.Requests) == 0 {
			add("", attr)
		}
		for _, r := range c.Requests {
			add(r, attr)
		}
	}
	return use
}

func (u constraintUse) uses(attr, request string) bool {
	if u[""][attr] || u[request][attr] {
		return true
	}
	parent, _, isSub := strings.Cut(request, "/")
	return isSub && u[parent][attr]
}

// derivedAttributes: at most 32, unique fully qualified names, each used by
// a constraint on this request, and an expression that compiles to a value
// an attribute can hold within the cost limit, as kube-apiserver 1.37
// checks them; the estimated costs add up to the claim's limit.
func derivedAttributes(attrs []resourcev1.DeviceDerivedAttribute, cc *claimCheck, request string, p *field.Path) field.ErrorList {
	if e := tooMany(p, len(attrs), MaxDerivedAttributes); e != nil {
		return e
	}
	var errs field.ErrorList
	for i := range attrs {
		ap := p.Index(i)
		name := string(attrs[i].Name)
		errs = append(errs, fullyQualifiedName(name, ap.Child("name"))...)
		if name != "" && !cc.used.uses(name, request) {
			errs = append(errs, field.Invalid(ap.Child("name"), name, "must be referenced by at least one matchAttribute or distinctAttribute constraint targeting this request"))
		}
		switch expr := attrs[i].Expression; {
		case expr == "":
			errs = append(errs, field.Required(ap.Child("expression"), ""))
		case len(expr) > CELExpressionMaxLength:
			errs = append(errs, field.TooLong(ap.Child("expression"), expr, CELExpressionMaxLength))
		default:
			prog, err := dracel.Default().CompileDerived(expr)
			var ce *dracel.CompileError
			switch {
			case err == nil:
				cc.derivedCost += prog.EstimatedCost()
			case errors.As(err, &ce):
				if ce.Kind == dracel.KindTooComplex {
					// kube-apiserver counts it towards the claim's total too.
					cc.derivedCost += ce.EstimatedCost
				}
				errs = append(errs, ce.FieldError(ap.Child("expression")))
			default:
				errs = append(errs, field.InternalError(ap.Child("expression"), err))
			}
		}
	}
	return append(errs, duplicates(attrs, func(a *resourcev1.DeviceDerivedAttribute) string { return string(a.Name) }, p)...)
}

const constraintDetail = "exactly one of `matchAttribute` or `distinctAttribute` is required"

// constraint: kube-apiserver requires one of matchAttribute and
// distinctAttribute and checks the format of each that is set; setting both
// is accepted (ResourceClaimWarnings reports it).
func constraint(c *resourcev1.DeviceConstraint, names requestNames, p *field.Path) field.ErrorList {
	errs := requestRefs(c.Requests, names, p.Child("requests"))
	if c.MatchAttribute == nil && c.DistinctAttribute == nil {
		return append(errs, field.Required(p, constraintDetail))
	}
	if c.MatchAttribute != nil {
		errs = append(errs, fullyQualifiedName(string(*c.MatchAttribute), p.Child("matchAttribute"))...)
	}
	if c.DistinctAttribute != nil {
		errs = append(errs, fullyQualifiedName(string(*c.DistinctAttribute), p.Child("distinctAttribute"))...)
	}
	return errs
}

func deviceConfiguration(c *resourcev1.DeviceConfiguration, p *field.Path) field.ErrorList {
	op := p.Child("opaque")
	if c.Opaque == nil {
		return field.ErrorList{field.Required(op, "")}
	}
	errs := driverName(c.Opaque.Driver, op.Child("driver"))
	return append(errs, rawObject(c.Opaque.Parameters, op.Child("parameters"))...)
}

// rawObject: opaque parameters must be a JSON object of at most 10 KiB. An
// object decoded from YAML may carry the parsed Object instead of Raw.
func rawObject(ext runtime.RawExtension, p *field.Path) field.ErrorList {
	raw := ext.Raw
	if len(raw) == 0 && ext.Object != nil {
		b, err := json.Marshal(ext.Object)
		if err != nil {
			return field.ErrorList{field.Invalid(p, "<value omitted>", fmt.Sprintf("error encoding object as JSON: %v", err))}
		}
		raw = b
	}
	if len(raw) == 0 {
		return field.ErrorList{field.Required(p, "")}
	}
	if len(raw) > OpaqueParametersMaxLength {
		return field.ErrorList{field.TooLong(p, "<value omitted>", OpaqueParametersMaxLength)}
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return field.ErrorList{field.Invalid(p, "<value omitted>", fmt.Sprintf("error parsing data as JSON: %v", err))}
	}
	if v == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	if _, ok := v.(map[string]any); !ok {
		return field.ErrorList{field.Invalid(p, "<value omitted>", "must be a valid JSON object")}
	}
	return nil
}

// allocation checks what can be checked without the slices: results refer
// to requests of the claim, name valid drivers, pools and devices, and
// the node selector is well formed.
func allocation(a *resourcev1.AllocationResult, names requestNames, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	rp := p.Child("devices", "results")
	if e := tooMany(rp, len(a.Devices.Results), MaxAllocationResults); e != nil {
		errs = append(errs, e...)
	} else {
		for i := range a.Devices.Results {
			r := &a.Devices.Results[i]
			ip := rp.Index(i)
			errs = append(errs, requestRef(r.Request, names, ip.Child("request"))...)
			errs = append(errs, driverName(r.Driver, ip.Child("driver"))...)
			errs = append(errs, poolName(r.Pool, ip.Child("pool"))...)
			errs = append(errs, dnsLabel(r.Device, ip.Child("device"))...)
			for _, k := range sortedKeys(r.ConsumedCapacity) {
				if q := r.ConsumedCapacity[k]; q.Sign() < 0 {
					errs = append(errs, field.Invalid(keyPath(ip.Child("consumedCapacity"), string(k), qualifiedKeyMaxPathLength), q.String(), apivalidation.IsNegativeErrorMsg))
				}
			}
		}
	}
	if a.NodeSelector != nil {
		// Unlike a slice's, an allocation's selector may have several terms.
		errs = append(errs, nodeSelector(a.NodeSelector, false, p.Child("nodeSelector"))...)
	}
	return errs
}
