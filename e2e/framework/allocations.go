package framework

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/utils/ptr"
)

// CheckAllocations reads every ResourceClaim, ResourceSlice, Pod and Node
// (TakeSnapshot) and returns what is wrong with the allocations
// (Snapshot.Check).
func CheckAllocations(ctx context.Context, client kubernetes.Interface) ([]string, error) {
	s, err := TakeSnapshot(ctx, client)
	if err != nil {
		return nil, err
	}
	return s.Check()
}

// Snapshot is the cluster's claims, slices, pods and nodes at one
// resource version: a pod bound after its claims were listed cannot look
// bound without them.
type Snapshot struct {
	ResourceVersion string
	Claims          []resourcev1.ResourceClaim
	Slices          []resourcev1.ResourceSlice
	Pods            []corev1.Pod
	Nodes           []corev1.Node
}

// TakeSnapshot lists the claims, then the rest at exactly their list's
// resource version (etcd's revision, which orders every kind).
func TakeSnapshot(ctx context.Context, client kubernetes.Interface) (*Snapshot, error) {
	claims, err := client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	s := &Snapshot{ResourceVersion: claims.ResourceVersion, Claims: claims.Items}
	at := metav1.ListOptions{ResourceVersion: s.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact}
	sl, err := client.ResourceV1().ResourceSlices().List(ctx, at)
	if err != nil {
		return nil, err
	}
	pods, err := client.CoreV1().Pods("").List(ctx, at)
	if err != nil {
		return nil, err
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, at)
	if err != nil {
		return nil, err
	}
	s.Slices, s.Pods, s.Nodes = sl.Items, pods.Items, nodes.Items
	return s, nil
}

// DeviceID names a device: its driver, pool and name.
type DeviceID struct{ Driver, Pool, Device string }

// Current returns the devices and the counter sets (by driver, pool and
// set name) of the current generation of every pool: what its newest
// slices publish.
func (snap *Snapshot) Current() (map[DeviceID]*resourcev1.Device, map[[3]string]map[string]resource.Quantity) {
	gen := map[[2]string]int64{}
	for _, s := range snap.Slices {
		k := [2]string{s.Spec.Driver, s.Spec.Pool.Name}
		gen[k] = max(gen[k], s.Spec.Pool.Generation)
	}
	devices := map[DeviceID]*resourcev1.Device{}
	sets := map[[3]string]map[string]resource.Quantity{}
	for i := range snap.Slices {
		s := &snap.Slices[i]
		if s.Spec.Pool.Generation != gen[[2]string{s.Spec.Driver, s.Spec.Pool.Name}] {
			continue
		}
		for j := range s.Spec.Devices {
			devices[DeviceID{s.Spec.Driver, s.Spec.Pool.Name, s.Spec.Devices[j].Name}] = &s.Spec.Devices[j]
		}
		for _, cs := range s.Spec.SharedCounters {
			m := map[string]resource.Quantity{}
			for n, c := range cs.Counters {
				m[n] = c.Value
			}
			sets[[3]string{s.Spec.Driver, s.Spec.Pool.Name, cs.Name}] = m
		}
	}
	return devices, sets
}

// Check returns what is wrong with the snapshot's allocations,
// independently of any allocator: a device held by two claims, a counter
// set or a device's consumable capacity given out beyond what the current
// generation of its pool offers, a pod bound to a node its claims'
// allocations exclude, a bound pod that has not terminated whose claims
// are not allocated and reserved for it. Devices no longer published (a pool's new generation
// dropped them) still count as held.
func (snap *Snapshot) Check() ([]string, error) {
	var problems []string
	devices, sets := snap.Current()
	holder := map[DeviceID]string{}
	consumed := map[[3]string]map[string]resource.Quantity{}
	capUsed := map[DeviceID]map[resourcev1.QualifiedName]resource.Quantity{}
	byName := map[string]*resourcev1.ResourceClaim{}
	for i := range snap.Claims {
		c := &snap.Claims[i]
		key := c.Namespace + "/" + c.Name
		byName[key] = c
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			id := DeviceID{r.Driver, r.Pool, r.Device}
			admin := ptr.Deref(r.AdminAccess, false)
			if !admin && r.ShareID == nil {
				if h, ok := holder[id]; ok {
					problems = append(problems, fmt.Sprintf("device %s/%s/%s held by %s and %s", r.Driver, r.Pool, r.Device, h, key))
				}
				holder[id] = key
			}
			for n, q := range r.ConsumedCapacity {
				if capUsed[id] == nil {
					capUsed[id] = map[resourcev1.QualifiedName]resource.Quantity{}
				}
				sum := capUsed[id][n]
				sum.Add(q)
				capUsed[id][n] = sum
			}
			d := devices[id]
			if d == nil || admin {
				continue
			}
			if r.ShareID != nil && len(d.ConsumesCounters) > 0 {
				// Counters of a shared device are consumed once, by the
				// first share; CheckAllocations does not model sharing.
				continue
			}
			for _, cc := range d.ConsumesCounters {
				k := [3]string{r.Driver, r.Pool, cc.CounterSet}
				if consumed[k] == nil {
					consumed[k] = map[string]resource.Quantity{}
				}
				for n, v := range cc.Counters {
					sum := consumed[k][n]
					sum.Add(v.Value)
					consumed[k][n] = sum
				}
			}
		}
	}
	for k, byCounter := range consumed {
		for n, used := range byCounter {
			capacity, ok := sets[k][n]
			if !ok || used.Cmp(capacity) > 0 {
				problems = append(problems, fmt.Sprintf("counter %s of %s/%s/%s: %s used, %s available", n, k[0], k[1], k[2], used.String(), capacity.String()))
			}
		}
	}
	for id, byName := range capUsed {
		d := devices[id]
		if d == nil {
			continue
		}
		for n, used := range byName {
			if c, ok := d.Capacity[n]; ok && used.Cmp(c.Value) > 0 {
				problems = append(problems, fmt.Sprintf("capacity %s of %s/%s/%s: %s used, %s available", n, id.Driver, id.Pool, id.Device, used.String(), c.Value.String()))
			}
		}
	}
	nodeByName := map[string]*corev1.Node{}
	for i := range snap.Nodes {
		nodeByName[snap.Nodes[i].Name] = &snap.Nodes[i]
	}
	for _, p := range snap.Pods {
		// A pod that has terminated needs its claims no more: the
		// resourceclaim controller releases them while the pod object
		// lingers (until its kubelet or the pod GC removes it).
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, pc := range p.Spec.ResourceClaims {
			name := ptr.Deref(pc.ResourceClaimName, "")
			for _, st := range p.Status.ResourceClaimStatuses {
				if st.Name == pc.Name {
					name = ptr.Deref(st.ResourceClaimName, "")
				}
			}
			c := byName[p.Namespace+"/"+name]
			switch {
			case c == nil || c.Status.Allocation == nil:
				problems = append(problems, fmt.Sprintf("pod %s/%s bound to %s, claim %s not allocated", p.Namespace, p.Name, p.Spec.NodeName, pc.Name))
				continue
			case !slices.ContainsFunc(c.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool { return r.UID == p.UID }):
				problems = append(problems, fmt.Sprintf("pod %s/%s bound, claim %s not reserved for it", p.Namespace, p.Name, name))
			}
			if ns := c.Status.Allocation.NodeSelector; ns != nil {
				sel, err := nodeaffinity.NewNodeSelector(ns)
				if err != nil {
					return nil, err
				}
				if n := nodeByName[p.Spec.NodeName]; n == nil || !sel.Match(n) {
					problems = append(problems, fmt.Sprintf("pod %s/%s bound to %s outside claim %s's node selector", p.Namespace, p.Name, p.Spec.NodeName, name))
				}
			}
		}
	}
	slices.Sort(problems)
	return problems, nil
}

// FormatProblems joins CheckAllocations' findings for a test failure.
func FormatProblems(ps []string) string {
	if len(ps) > 20 {
		ps = append(ps[:20:20], fmt.Sprintf("... and %d more", len(ps)-20))
	}
	return strings.Join(ps, "\n")
}
