package prepare

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/dractl/dractl/pkg/internal/claimlock"
)

// Failpoint names a step of prepare or unprepare, right after it took
// effect. Crash tests kill the driver there and check that a restart
// neither leaks nor duplicates anything.
type Failpoint string

const (
	AfterPrepareStarted     Failpoint = "prepare-started"     // PrepareStarted written
	AfterPartitionCreated   Failpoint = "partition-created"   // a partition exists, not yet recorded
	AfterPartitionRecorded  Failpoint = "partition-recorded"  // its ID is in the checkpoint
	AfterCDIWritten         Failpoint = "cdi-written"         // the CDI spec exists
	AfterPrepareCompleted   Failpoint = "prepare-completed"   // PrepareCompleted written, kubelet not yet answered
	AfterUnprepareStarted   Failpoint = "unprepare-started"   // UnprepareStarted written
	AfterCDIRemoved         Failpoint = "cdi-removed"         // the CDI spec is gone
	AfterPartitionDestroyed Failpoint = "partition-destroyed" // a partition is gone
	AfterCheckpointDeleted  Failpoint = "checkpoint-deleted"  // the claim's checkpoint is gone
)

// PrepareFailpoints and UnprepareFailpoints list the steps in order.
var (
	PrepareFailpoints   = []Failpoint{AfterPrepareStarted, AfterPartitionCreated, AfterPartitionRecorded, AfterCDIWritten, AfterPrepareCompleted}
	UnprepareFailpoints = []Failpoint{AfterUnprepareStarted, AfterCDIRemoved, AfterPartitionDestroyed, AfterCheckpointDeleted}
)

// Config configures a Kit.
type Config struct {
	// DriverName is the DRA driver name; it is also the CDI vendor.
	DriverName string
	Profile    Profile
	// StateDir holds the checkpoints; it must survive restarts of the
	// driver (not of the node: partitions do not either).
	StateDir string
	// CDIDir is where the container runtime reads CDI specs.
	CDIDir string
	// CDIClass is the CDI class of the claim specs; "claim" by default.
	CDIClass string
	// Failpoint, if set, is called after each step of prepare and
	// unprepare. Crash tests make it kill the process.
	Failpoint func(Failpoint)
}

// Kit prepares and unprepares claims. It is safe for concurrent use:
// claims are prepared in parallel, one claim's calls are serialized, and
// the check that a claim's devices are free is atomic with reserving
// them, so of two overlapping prepares exactly one wins.
type Kit struct {
	cfg     Config
	profile Profile
	ckpt    *checkpoints
	cdi     *cdiSpecs

	claimLocks claimlock.Locks

	mu   sync.Mutex
	inv  Inventory
	held map[DeviceKey]types.UID // exclusive devices by claim
	// used sums the counters of held devices per counter set (pool,
	// set); claimUse is each claim's share, so release undoes exactly
	// what reserve added even if the published pool changed in between.
	used     counterUse
	claimUse map[types.UID]counterUse
	// prepared are the claims prepared (PrepareCompleted), for the
	// metrics.
	prepared map[types.UID][]PreparedDevice
}

// counterSetKey names a published counter set.
type counterSetKey struct {
	Pool, Set string
}

type counterUse map[counterSetKey]map[string]resource.Quantity

func (u counterUse) add(set counterSetKey, counter string, v resource.Quantity, sign int) {
	if u[set] == nil {
		u[set] = map[string]resource.Quantity{}
	}
	q := u[set][counter]
	if sign < 0 {
		q.Sub(v)
	} else {
		q.Add(v)
	}
	u[set][counter] = q
}

// New creates a Kit. Call Reconcile before the first Prepare.
func New(cfg Config) (*Kit, error) {
	if cfg.DriverName == "" || cfg.Profile == nil || cfg.StateDir == "" || cfg.CDIDir == "" {
		return nil, errors.New("prepare: DriverName, Profile, StateDir and CDIDir must be set")
	}
	if cfg.CDIClass == "" {
		cfg.CDIClass = "claim"
	}
	ckpt, err := newCheckpoints(filepath.Join(cfg.StateDir, "claims"))
	if err != nil {
		return nil, err
	}
	cdi, err := newCDISpecs(cfg.CDIDir, cfg.DriverName, cfg.CDIClass)
	if err != nil {
		return nil, err
	}
	return &Kit{
		cfg: cfg, profile: cfg.Profile, ckpt: ckpt, cdi: cdi,
		inv: newInventory(), held: map[DeviceKey]types.UID{}, used: counterUse{}, claimUse: map[types.UID]counterUse{},
		prepared: map[types.UID][]PreparedDevice{},
	}, nil
}

// SetInventory tells the kit what is published, so that prepares of
// devices it does not publish, or beyond its counters, are refused.
func (k *Kit) SetInventory(inv Inventory) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.inv = inv
}

// Prepared are the claims the kit holds prepared (PrepareCompleted), with
// their devices; what the driver's metrics count.
func (k *Kit) Prepared() map[types.UID][]PreparedDevice {
	k.mu.Lock()
	defer k.mu.Unlock()
	// The device lists are cloned when a claim is marked prepared and
	// never changed after, so sharing them is safe.
	return maps.Clone(k.prepared)
}

func (k *Kit) failpoint(f Failpoint) {
	if k.cfg.Failpoint != nil {
		k.cfg.Failpoint(f)
	}
}

// devicesOf lists the claim's devices of this driver.
func (k *Kit) devicesOf(claim *resourcev1.ResourceClaim) ([]PreparedDevice, error) {
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("claim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	var out []PreparedDevice
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != k.cfg.DriverName {
			continue
		}
		out = append(out, PreparedDevice{AllocatedDevice: AllocatedDevice{
			Request: r.Request, Pool: r.Pool, Device: r.Device,
			AdminAccess: r.AdminAccess != nil && *r.AdminAccess, ShareID: r.ShareID,
		}})
	}
	return out, nil
}

// Prepare prepares the claim's devices of this driver and returns what
// the kubelet hands the runtime. Preparing a prepared claim returns the
// recorded answer and creates nothing but its CDI spec, when that is
// missing or damaged.
func (k *Kit) Prepare(ctx context.Context, claim *resourcev1.ResourceClaim) ([]kubeletplugin.Device, error) {
	uid := claim.UID
	unlock := k.claimLocks.Lock(uid)
	defer unlock()

	rec, err := k.ckpt.Read(uid)
	if err != nil {
		return nil, because(ReasonCheckpoint, err)
	}
	if rec != nil && rec.State == PrepareCompleted {
		// The kubelet asks again after it restarts, and a node that
		// rebooted has lost its runtime's CDI directory: the answer
		// names devices of the claim's spec, so the spec must be
		// there for the runtime to resolve them.
		wrote, err := k.ensureSpec(rec)
		if err != nil {
			return nil, because(ReasonCDI, err)
		}
		if wrote {
			klog.FromContext(ctx).Info("Wrote the CDI spec of a prepared claim again", "claim", klog.KRef(claim.Namespace, claim.Name), "uid", uid)
		}
		return k.answer(rec), nil
	}
	if rec != nil {
		// An earlier attempt was interrupted: start again from nothing.
		if err := k.rollBack(ctx, rec); err != nil {
			return nil, fmt.Errorf("roll back interrupted %s of claim %s: %w", rec.State, uid, err)
		}
	}

	devices, err := k.devicesOf(claim)
	if err != nil {
		return nil, because(ReasonNotAllocated, err)
	}
	if err := k.resolveConfigs(claim, devices); err != nil {
		return nil, because(ReasonConfig, err)
	}
	rec = &ClaimRecord{UID: uid, Namespace: claim.Namespace, Name: claim.Name, State: PrepareStarted, Devices: devices}
	if err := k.reserve(uid, devices, false); err != nil {
		return nil, err
	}
	if err := k.ckpt.Write(rec); err != nil {
		k.release(uid)
		return nil, because(ReasonCheckpoint, fmt.Errorf("checkpoint claim %s: %w", uid, err))
	}
	k.failpoint(AfterPrepareStarted)

	fail := func(err error) ([]kubeletplugin.Device, error) {
		if rbErr := k.rollBack(ctx, rec); rbErr != nil {
			return nil, fmt.Errorf("%w (rolling back failed too, the next prepare or restart retries: %v)", err, rbErr)
		}
		return nil, err
	}
	for i := range rec.Devices {
		d := &rec.Devices[i]
		p, err := k.profile.CreatePartition(ctx, uid, d.AllocatedDevice)
		if err != nil {
			return fail(because(ReasonPartition, fmt.Errorf("create partition for device %s/%s: %w", d.Pool, d.Device, err)))
		}
		k.failpoint(AfterPartitionCreated)
		d.Partition = &p
		if err := k.ckpt.Write(rec); err != nil {
			return fail(because(ReasonCheckpoint, fmt.Errorf("checkpoint claim %s: %w", uid, err)))
		}
		k.failpoint(AfterPartitionRecorded)
	}

	specDevices := k.cdiDevices(uid, rec.Devices)
	if err := hostDeviceNodes(specDevices); err != nil {
		return fail(because(ReasonCDI, fmt.Errorf("claim %s: %w", uid, err)))
	}
	if err := k.cdi.write(uid, specDevices); err != nil {
		return fail(because(ReasonCDI, err))
	}
	k.failpoint(AfterCDIWritten)

	rec.State = PrepareCompleted
	if err := k.ckpt.Write(rec); err != nil {
		return fail(because(ReasonCheckpoint, fmt.Errorf("checkpoint claim %s: %w", uid, err)))
	}
	k.markPrepared(rec)
	k.failpoint(AfterPrepareCompleted)
	klog.FromContext(ctx).V(2).Info("Prepared claim", "claim", klog.KRef(claim.Namespace, claim.Name), "uid", uid, "devices", len(rec.Devices))
	return k.answer(rec), nil
}

// cdiDevices are the CDI devices of a claim's spec — one per prepared
// device and, for a RequestEditsProfile, one per top-level request — and
// sets each device's CDIDeviceIDs: its own, and its request's on the
// request's first device, so that a container given the request gets the
// request's edits exactly once.
func (k *Kit) cdiDevices(uid types.UID, devices []PreparedDevice) []cdispec.Device {
	out := make([]cdispec.Device, 0, len(devices))
	for i := range devices {
		d := &devices[i]
		var p Partition
		if d.Partition != nil {
			p = *d.Partition
		}
		name := k.cdi.deviceName(uid, d.Device)
		out = append(out, cdispec.Device{Name: name, ContainerEdits: k.profile.ContainerEdits(uid, d.AllocatedDevice, p)})
		d.CDIDeviceIDs = []string{k.cdi.qualified(name)}
	}
	rp, ok := k.profile.(RequestEditsProfile)
	if !ok {
		return out
	}
	names, groups := requestGroups(devices)
	for g, request := range names {
		group := make([]PreparedDevice, len(groups[g]))
		for j, i := range groups[g] {
			group[j] = devices[i]
		}
		edits := rp.RequestEdits(uid, request, group)
		if len(edits.Env)+len(edits.DeviceNodes)+len(edits.Mounts)+len(edits.Hooks) == 0 {
			continue
		}
		name := k.cdi.requestName(uid, request)
		out = append(out, cdispec.Device{Name: name, ContainerEdits: edits})
		first := &devices[groups[g][0]]
		first.CDIDeviceIDs = append(first.CDIDeviceIDs, k.cdi.qualified(name))
	}
	return out
}

func (k *Kit) answer(rec *ClaimRecord) []kubeletplugin.Device {
	out := make([]kubeletplugin.Device, len(rec.Devices))
	for i, d := range rec.Devices {
		out[i] = kubeletplugin.Device{
			Requests: []string{d.Request}, PoolName: d.Pool, DeviceName: d.Device,
			CDIDeviceIDs: slices.Clone(d.CDIDeviceIDs), ShareID: d.ShareID,
		}
	}
	return out
}

// Unprepare undoes Prepare. A claim that is not prepared is not an error:
// the kubelet repeats calls after restarts.
func (k *Kit) Unprepare(ctx context.Context, uid types.UID) error {
	unlock := k.claimLocks.Lock(uid)
	defer unlock()

	rec, err := k.ckpt.Read(uid)
	var corrupt *CorruptCheckpointError
	switch {
	case errors.As(err, &corrupt):
		// What was prepared is unknown, so destroy what the hardware
		// says belongs to the claim and keep the file for inspection.
		klog.FromContext(ctx).Error(err, "Unpreparing a claim whose checkpoint is corrupt", "uid", uid)
		if err := k.ckpt.Quarantine(corrupt.Path); err != nil {
			return because(ReasonCheckpoint, err)
		}
		return k.rollBack(ctx, &ClaimRecord{UID: uid, State: UnprepareStarted})
	case err != nil:
		return because(ReasonCheckpoint, err)
	case rec == nil:
		return nil
	case rec.State == PrepareStarted:
		return k.rollBack(ctx, rec)
	}
	if rec.State != UnprepareStarted {
		rec.State = UnprepareStarted
		if err := k.ckpt.Write(rec); err != nil {
			return because(ReasonCheckpoint, fmt.Errorf("checkpoint claim %s: %w", uid, err))
		}
		k.failpoint(AfterUnprepareStarted)
	}
	if err := k.rollBack(ctx, rec); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Unprepared claim", "claim", klog.KRef(rec.Namespace, rec.Name), "uid", uid)
	return nil
}

// rollBack removes everything a claim may have: its CDI spec, the
// partitions the record names and those the hardware attributes to the
// claim, then its checkpoint and reservation. Each step is idempotent, so
// a crash anywhere is repaired by running it again.
func (k *Kit) rollBack(ctx context.Context, rec *ClaimRecord) error {
	if err := k.cdi.remove(rec.UID); err != nil {
		return because(ReasonCDI, err)
	}
	k.failpoint(AfterCDIRemoved)
	existing, err := k.profile.Partitions(ctx)
	if err != nil {
		return because(ReasonPartition, fmt.Errorf("list partitions: %w", err))
	}
	for _, p := range existing {
		if !k.ownedBy(p, rec) {
			continue
		}
		if err := k.profile.DestroyPartition(ctx, p); err != nil {
			return because(ReasonPartition, fmt.Errorf("destroy partition %s of device %s/%s: %w", p.ID, p.Pool, p.Device, err))
		}
		k.failpoint(AfterPartitionDestroyed)
	}
	if err := k.ckpt.Delete(rec.UID); err != nil {
		return because(ReasonCheckpoint, fmt.Errorf("delete checkpoint of claim %s: %w", rec.UID, err))
	}
	k.release(rec.UID)
	k.failpoint(AfterCheckpointDeleted)
	return nil
}

// ownedBy: the hardware's word when it has one; otherwise the record's
// partition IDs, or its devices for partitions created but not yet
// recorded when the driver stopped.
func (k *Kit) ownedBy(p Partition, rec *ClaimRecord) bool {
	if p.Claim != "" {
		return p.Claim == rec.UID
	}
	for _, d := range rec.Devices {
		if d.Partition != nil && d.Partition.ID == p.ID || d.Pool == p.Pool && d.Device == p.Device {
			return true
		}
	}
	return false
}

// PrepareConflictError is a prepare refused because another claim on this
// node holds a device or counters the claim needs, or because the claim
// names a device this driver does not publish.
type PrepareConflictError struct {
	Claim  types.UID
	Device DeviceKey
	// Holders are the claims in the way.
	Holders []types.UID
	Reason  string
}

func (e *PrepareConflictError) Error() string {
	return fmt.Sprintf("claim %s: device %s %s (held by claim %s)", e.Claim, e.Device, e.Reason, joinUIDs(e.Holders))
}

func joinUIDs(uids []types.UID) string {
	s := make([]string, len(uids))
	for i, u := range uids {
		s[i] = string(u)
	}
	return strings.Join(s, ", ")
}

// reserve checks that the claim's exclusive devices are published, free,
// and fit the counters left by the devices other claims hold, and holds
// them, all under one lock. The scheduler should never allocate a
// conflict; this is the last line of defence when it did (a stale
// allocation, a force-deleted pod). With force (claims found prepared at
// start) nothing is refused: they exist whatever the checks say.
func (k *Kit) reserve(uid types.UID, devices []PreparedDevice, force bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	add := counterUse{}
	var mine []DeviceKey
	for _, d := range devices {
		key := DeviceKey{d.Pool, d.Device}
		if !k.inv.Known(key) && !force {
			return &PrepareConflictError{Claim: uid, Device: key, Reason: "is not published by this driver"}
		}
		if !d.exclusive() {
			continue
		}
		if holder, ok := k.held[key]; (ok && holder != uid || slices.Contains(mine, key)) && !force {
			return &PrepareConflictError{Claim: uid, Device: key, Holders: []types.UID{holder}, Reason: "is already prepared"}
		}
		mine = append(mine, key)
		for _, c := range k.inv.consumes[key] {
			set := counterSetKey{d.Pool, c.CounterSet}
			avail, ok := k.inv.sets[set]
			if !ok && !force {
				return &PrepareConflictError{Claim: uid, Device: key, Reason: "consumes from unknown counter set " + c.CounterSet}
			}
			for _, name := range slices.Sorted(maps.Keys(c.Counters)) {
				v := c.Counters[name]
				total := k.used[set][name].DeepCopy()
				total.Add(add[set][name])
				total.Add(v.Value)
				if limit := avail[name]; total.Cmp(limit) > 0 && !force {
					return &PrepareConflictError{Claim: uid, Device: key, Holders: k.holdersOf(set, name),
						Reason: fmt.Sprintf("overlaps a prepared partition: counter %s of %s would be %s of %s", name, c.CounterSet, total.String(), limit.String())}
				}
				add.add(set, name, v.Value, 1)
			}
		}
	}
	for _, key := range mine {
		k.held[key] = uid
	}
	if k.claimUse[uid] == nil {
		k.claimUse[uid] = counterUse{}
	}
	for set, cs := range add {
		for name, v := range cs {
			k.used.add(set, name, v, 1)
			k.claimUse[uid].add(set, name, v, 1)
		}
	}
	return nil
}

// holdersOf lists the claims holding a device that consumes the counter.
func (k *Kit) holdersOf(set counterSetKey, counter string) []types.UID {
	var out []types.UID
	for uid, use := range k.claimUse {
		if q, ok := use[set][counter]; ok && !q.IsZero() {
			out = append(out, uid)
		}
	}
	slices.Sort(out)
	return out
}

// markPrepared records a claim as prepared.
func (k *Kit) markPrepared(rec *ClaimRecord) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.prepared[rec.UID] = slices.Clone(rec.Devices)
}

// release frees the claim's devices and counters.
func (k *Kit) release(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.prepared, uid)
	for key, holder := range k.held {
		if holder == uid {
			delete(k.held, key)
		}
	}
	for set, cs := range k.claimUse[uid] {
		for name, v := range cs {
			k.used.add(set, name, v, -1)
		}
	}
	delete(k.claimUse, uid)
}
