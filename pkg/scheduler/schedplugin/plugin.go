package schedplugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/dractl/dractl/pkg/core/state"
	"github.com/dractl/dractl/pkg/core/state/informer"
	"github.com/dractl/dractl/pkg/core/validation"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "DractlDynamicResources"

// Plugin is dractl's DRA scheduler plugin. Make one with NewFactory.
//
// kube-scheduler calls the framework's extension points on Plugin, one
// file per phase; the state a phase keeps across cycles is in a part of
// its own, beside the methods that use it: claims (the claim and pod
// lookups of PreEnqueue, PreFilter and the queueing hints), results (the
// reused per-node results maps), binder (PreBind's writes and the gate
// that paces cycles to them), nodeResources (KEP-5517's footprints) and
// feed and waiting, which the informers' handlers drive. Plugin holds no
// lock of its own: each part guards its own state, and what one cycle
// knows is its cycleState.
type Plugin struct {
	cfg       config
	fts       Features
	fh        fwk.Handle
	clientset kubernetes.Interface
	dra       fwk.SharedDRAManager
	st        *state.State
	feed      *feed
	// waiting are the pods the State turned away (see waitlist).
	waiting *waitlist
	// synced reports whether the State has seen every object the
	// informers listed at start.
	synced []cache.InformerSynced
	// claims finds pods' claims and claims' pods (see claimIndex).
	claims claimIndex
	// results holds cycles' results maps for reuse (see resultMaps).
	results resultMaps
	// binder writes the claims and paces the cycles (see binder).
	binder binder
	// nodeResources counts devices that stand for node resources (see
	// nodeResources).
	nodeResources nodeResources
}

var (
	_ fwk.PreEnqueuePlugin         = &Plugin{}
	_ fwk.PreFilterPlugin          = &Plugin{}
	_ fwk.FilterPlugin             = &Plugin{}
	_ fwk.PostFilterPlugin         = &Plugin{}
	_ fwk.PodGroupPostFilterPlugin = &Plugin{}
	_ fwk.PreScorePlugin           = &Plugin{}
	_ fwk.ScorePlugin              = &Plugin{}
	_ fwk.ReservePlugin            = &Plugin{}
	_ fwk.PreBindPlugin            = &Plugin{}
	_ fwk.EnqueueExtensions        = &Plugin{}
	_ fwk.SignPlugin               = &Plugin{}
)

// Factory has the signature of kube-scheduler's PluginFactory
// (k8s.io/kubernetes/pkg/scheduler/framework/runtime), which out-of-tree
// plugins register with app.WithPlugin.
type Factory = func(ctx context.Context, args runtime.Object, fh fwk.Handle) (fwk.Plugin, error)

// NewFactory returns the plugin's factory. fts are the feature gates the
// scheduler runs with (see FeaturesFrom); stateOpts configure the State
// every instance allocates from, except for its feature set, which is
// fts.Allocation.
func NewFactory(fts Features, stateOpts state.Options) Factory {
	return func(ctx context.Context, args runtime.Object, fh fwk.Handle) (fwk.Plugin, error) {
		return New(ctx, args, fh, fts, stateOpts)
	}
}

// New makes a plugin for one scheduling profile: its own State, fed by
// the profile's shared informers, allocating with fts.Allocation.
func New(ctx context.Context, args runtime.Object, fh fwk.Handle, fts Features, stateOpts state.Options) (*Plugin, error) {
	cfg, err := decodeArgs(args)
	if err != nil {
		return nil, err
	}
	dra := fh.SharedDRAManager()
	if dra == nil {
		return nil, fmt.Errorf("%s needs the scheduler's DRA manager: enable the DynamicResourceAllocation feature", Name)
	}
	logger := klog.LoggerWithName(klog.FromContext(ctx), Name)
	stateOpts.Features = fts.Allocation
	// The allocator answers as the in-tree plugin of the kube-scheduler
	// this build links.
	stateOpts.KubeVersion = validation.KubeVersion{Minor: kubeMinor}
	// Every cycle asks every node, and most nodes did not change since
	// the last one.
	stateOpts.MemoizeNodes = true
	st := state.New(stateOpts)
	// The framework's PodActivator is set after the plugins are made.
	waiting := newWaitlist(func(pods map[string]*v1.Pod) { fh.Activate(logger, pods) })
	clientset := fh.ClientSet()
	pl := &Plugin{cfg: cfg, fts: fts, fh: fh, clientset: clientset, dra: dra, st: st,
		feed: newFeed(st, waiting, logger), waiting: waiting,
		claims: claimIndex{dra: dra, fts: fts},
		binder: binder{clientset: clientset, dra: dra, conditions: fts.BindingConditions,
			timeout: cfg.bindingTimeout, gate: newBindGate(cfg.bindingsInFlight)},
		nodeResources: nodeResources{clientset: clientset, fts: fts}}
	pl.feed.tracker = dra.ResourceClaims()
	// Registered first: until then the metrics count nothing.
	registerMetrics(fh.ProfileName(), st)
	pl.feed.expired = assumptionsExpired.WithLabelValues(fh.ProfileName()).Inc
	if err := pl.watch(logger); err != nil {
		return nil, err
	}
	if fts.NodeAllocatableResources {
		if err := pl.nodeResources.forgetGone(fh.SharedInformerFactory().Core().V1().Pods().Informer()); err != nil {
			return nil, err
		}
	}
	return pl, nil
}

// watch feeds the State from the scheduler's informers. DeviceTaintRules,
// when that feature is on, go to the State, which applies them to the
// slices (pkg/core/state, taintrules.go) as it does for every other user of a
// State.
func (pl *Plugin) watch(logger klog.Logger) error {
	inf := pl.fh.SharedInformerFactory().Resource().V1()
	sliceDeltas, classDeltas := informer.Slices(pl.st), informer.Classes(pl.st)
	// New or changed slices and classes may offer devices that waiting
	// pods lacked.
	profile := pl.fh.ProfileName()
	sliceDeltas.Then = countDeltas(profile, "ResourceSlice", roomMadeBy[*resourcev1.ResourceSlice](pl.waiting))
	classDeltas.Then = countDeltas(profile, "DeviceClass", roomMadeBy[*resourcev1.DeviceClass](pl.waiting))
	sliceReg, err := informer.Watch(logger, inf.ResourceSlices().Informer(), sliceDeltas)
	if err != nil {
		return err
	}
	classReg, err := informer.Watch(logger, inf.DeviceClasses().Informer(), classDeltas)
	if err != nil {
		return err
	}
	claimReg, err := informer.Watch(logger, inf.ResourceClaims().Informer(), informer.Deltas[*resourcev1.ResourceClaim]{
		Kind: "ResourceClaim", Set: pl.feed.setClaim, Delete: pl.feed.deleteClaim,
		Then: countDeltas[*resourcev1.ResourceClaim](profile, "ResourceClaim", nil)})
	if err != nil {
		return err
	}
	pl.synced = []cache.InformerSynced{sliceReg.HasSynced, classReg.HasSynced, claimReg.HasSynced}
	if pl.fts.DeviceTaintRules {
		rules := informer.TaintRules(pl.st)
		// Any change of a rule may untaint devices: a deleted rule, or
		// one that selects others now.
		rules.Then = countDeltas(profile, "DeviceTaintRule", func(d informer.Delta[*resourcev1.DeviceTaintRule]) {
			if d.Err == nil {
				pl.waiting.roomMade()
			}
		})
		ruleReg, err := informer.Watch(logger, inf.DeviceTaintRules().Informer(), rules)
		if err != nil {
			return err
		}
		pl.synced = append(pl.synced, ruleReg.HasSynced)
	}
	pl.claims.claimsListed = inf.ResourceClaims().Informer().HasSynced
	pods := pl.fh.SharedInformerFactory().Core().V1().Pods().Informer()
	if err := pl.claims.indexClaimNames(pods, profile); err != nil {
		return err
	}
	if pl.fts.ExtendedResource {
		if err := pl.claims.indexExtendedClaims(inf.ResourceClaims().Informer()); err != nil {
			return err
		}
	}
	return pl.feed.indexForeignClaims(pods, profile)
}

// roomMadeBy tells the waiting pods when the State took an added or
// changed object.
func roomMadeBy[T any](waiting *waitlist) func(informer.Delta[T]) {
	return func(d informer.Delta[T]) {
		if !d.Deleted && d.Err == nil {
			waiting.roomMade()
		}
	}
}

// Name implements fwk.Plugin.
func (pl *Plugin) Name() string { return Name }

// waitForSync blocks the first scheduling cycles until the State has
// seen what the informers listed, so that no device held by an existing
// allocation looks free.
func (pl *Plugin) waitForSync(ctx context.Context) error {
	for _, s := range pl.synced {
		if !s() {
			if !cache.WaitForCacheSync(ctx.Done(), pl.synced...) {
				return fmt.Errorf("allocation state not synced: %w", context.Cause(ctx))
			}
			return nil
		}
	}
	return nil
}
