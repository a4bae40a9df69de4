package allocator

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// results turns the picks into one AllocationResult per claim, the way
// upstream fills results, configuration and the node selector.
func (at *attempt) results() ([]*resourcev1.AllocationResult, error) {
	// One array for the results and one for their devices: a scheduler
	// builds them for every node that fits. Each claim's devices get a
	// capped part of the array, so appending to one never writes another.
	var out []*resourcev1.AllocationResult
	var block []resourcev1.AllocationResult
	var devs []resourcev1.DeviceRequestAllocationResult
	var pin *pinned
	picks := at.st.picks
	if len(at.claims) == 1 && len(picks) == 1 {
		b := new(resultBlock)
		out, block, devs, pin = b.out[:], b.block[:], b.devs[:0], &b.pin
	} else {
		out = make([]*resourcev1.AllocationResult, len(at.claims))
		block = make([]resourcev1.AllocationResult, len(at.claims))
		devs = make([]resourcev1.DeviceRequestAllocationResult, 0, len(picks))
	}
	for ci := range at.claims {
		out[ci] = &block[ci]
		start := len(devs)
		for _, pk := range picks {
			if pk.al.req.claim == ci {
				devs = append(devs, resourcev1.DeviceRequestAllocationResult{})
			}
		}
		block[ci].Devices.Results = devs[start:start:len(devs)]
	}
	for _, pk := range picks {
		d := pk.c.d
		req := pk.al.req
		r := resourcev1.DeviceRequestAllocationResult{
			Request:            req.name,
			Driver:             d.t.pt.driver,
			Pool:               d.t.pt.pool,
			Device:             d.name,
			Tolerations:        req.tols,
			ShareID:            pk.shareID,
			SkipNodeOperations: d.sliceInfo().skip,
		}
		if d.bindingSet {
			r.BindingConditions, r.BindingFailureConditions = d.d.BindingConditions, d.d.BindingFailureConditions
		}
		if req.admin {
			r.AdminAccess = ptr.To(true)
		}
		if len(pk.consumed) > 0 {
			r.ConsumedCapacity = make(map[resourcev1.QualifiedName]resource.Quantity, len(pk.consumed))
			for n, q := range pk.consumed {
				r.ConsumedCapacity[n] = q.DeepCopy()
			}
		}
		res := out[req.claim]
		res.Devices.Results = append(res.Devices.Results, r)
	}
	for ci, claim := range at.claims {
		out[ci].Devices.Config = at.configs(ci, claim)
		ns, err := at.nodeSelector(ci, pin)
		if err != nil {
			return nil, &FatalError{Claim: claimName(claim), Err: fmt.Errorf("create NodeSelector: %w", err)}
		}
		out[ci].NodeSelector = ns
	}
	return out, nil
}

// chosen appends to served the planned request that served each request
// of a claim: the request itself or its chosen subrequest.
func (at *attempt) chosen(ci int, served []*request) []*request {
	for i := range at.requests {
		if cr := &at.requests[i]; cr.claim == ci {
			served = append(served, cr.alternatives[cr.chosen].req)
		}
	}
	return served
}

// configs: class configuration once per class, naming every request that
// used the class; then claim configuration that names a request (or its
// chosen subrequest) or names none; lists naming every request become
// "applies to all".
func (at *attempt) configs(ci int, claim *resourcev1.ResourceClaim) []resourcev1.DeviceAllocationConfiguration {
	var cfg []resourcev1.DeviceAllocationConfiguration
	// A claim has few requests and fewer classes: a list beats a map.
	type span struct {
		class      string
		start, end int
	}
	var spanBuf [4]span
	byClass := spanBuf[:0]
	var buf [4]*request
	served := at.chosen(ci, buf[:0])
next:
	for _, r := range served {
		for _, sp := range byClass {
			if sp.class == r.class.Name {
				for i := sp.start; i < sp.end; i++ {
					cfg[i].Requests = append(cfg[i].Requests, r.name)
				}
				continue next
			}
		}
		start := len(cfg)
		for _, c := range r.class.Spec.Config {
			cfg = append(cfg, resourcev1.DeviceAllocationConfiguration{
				Source: resourcev1.AllocationConfigSourceClass, Requests: []string{r.name}, DeviceConfiguration: c.DeviceConfiguration})
		}
		byClass = append(byClass, span{r.class.Name, start, len(cfg)})
	}
	for _, c := range claim.Spec.Devices.Config {
		use := len(c.Requests) == 0
		for i, req := range claim.Spec.Devices.Requests {
			if use {
				break
			}
			if slices.Contains(c.Requests, req.Name) || (served[i].parent != "" && slices.Contains(c.Requests, served[i].name)) {
				use = true
			}
		}
		if use {
			cfg = append(cfg, resourcev1.DeviceAllocationConfiguration{
				Source: resourcev1.AllocationConfigSourceClaim, Requests: c.Requests, DeviceConfiguration: c.DeviceConfiguration})
		}
	}
	for i := range cfg {
		if len(cfg[i].Requests) == 0 {
			continue
		}
		all := true
		for ri, req := range claim.Spec.Devices.Requests {
			if slices.Contains(cfg[i].Requests, req.Name) {
				continue
			}
			if served[ri].parent != "" && slices.Contains(cfg[i].Requests, served[ri].name) {
				continue
			}
			all = false
			break
		}
		if all {
			cfg[i].Requests = nil
		}
	}
	return cfg
}

// nodeSelector: a device bound to one node (slice or per-device nodeName,
// or bindsToNode) pins the claim to this node (in pin, when not nil);
// otherwise the single-term selectors of the devices (the device's own for
// per-device node selection, which is how a multi-host device yields its
// node set) are merged; devices available everywhere add nothing.
func (at *attempt) nodeSelector(ci int, pin *pinned) (*corev1.NodeSelector, error) {
	term := corev1.NodeSelectorTerm{}
	for _, pk := range at.st.picks {
		if pk.al.req.claim != ci {
			continue
		}
		d := pk.c.d
		si := d.sliceInfo()
		// The table knows whether the slice names its node: the slice
		// object is read only for a selector, since on a cluster of many
		// nodes it is no longer in the CPU caches.
		named := si.pinned
		var sel *corev1.NodeSelector
		if si.perDevice {
			named, sel = d.d.NodeName != nil, d.d.NodeSelector
		} else if !named {
			sel = si.s.Spec.NodeSelector
		}
		if named || ptr.Deref(d.d.BindsToNode, false) {
			if pin == nil {
				pin = new(pinned)
			}
			return pin.to(at.node.Name), nil
		}
		if sel == nil {
			continue
		}
		switch len(sel.NodeSelectorTerms) {
		case 0:
		case 1:
			term.MatchFields = mergeReqs(term.MatchFields, sel.NodeSelectorTerms[0].MatchFields)
			term.MatchExpressions = mergeReqs(term.MatchExpressions, sel.NodeSelectorTerms[0].MatchExpressions)
		default:
			return nil, fmt.Errorf("unsupported ResourceSlice.NodeSelector with %d terms", len(sel.NodeSelectorTerms))
		}
	}
	if len(term.MatchFields) == 0 && len(term.MatchExpressions) == 0 {
		return nil, nil
	}
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}, nil
}

// mergeReqs appends requirements not present yet; two requirements are the
// same when key, operator and the set of values agree.
func mergeReqs(to, from []corev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
	for _, r := range from {
		dup := false
		for _, e := range to {
			if e.Key == r.Key && e.Operator == r.Operator && sameSet(e.Values, r.Values) {
				dup = true
				break
			}
		}
		if !dup {
			to = append(to, r)
		}
	}
	return to
}

func sameSet(x, y []string) bool {
	for _, v := range x {
		if !slices.Contains(y, v) {
			return false
		}
	}
	for _, v := range y {
		if !slices.Contains(x, v) {
			return false
		}
	}
	return true
}
