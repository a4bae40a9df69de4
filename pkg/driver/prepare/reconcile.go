package prepare

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// ReconcileReport says what Reconcile found and did.
type ReconcileReport struct {
	// Prepared are the claims found PrepareCompleted; they stay.
	Prepared []types.UID
	// RolledBack are claims found PrepareStarted: their partitions and
	// spec are gone, the kubelet's next prepare starts afresh.
	RolledBack []types.UID
	// Unprepared are claims found UnprepareStarted, now unprepared.
	Unprepared []types.UID
	// Destroyed are partitions no completed claim owned.
	Destroyed []Partition
	// RemovedSpecs are CDI specs of claims without a completed record.
	RemovedSpecs []types.UID
	// RewrittenSpecs are completed claims whose CDI spec was missing
	// (a node's /var/run/cdi is a tmpfs: a reboot empties it) or not
	// the one their record gives (a damaged file).
	RewrittenSpecs []types.UID
	// Corrupt are checkpoints that could not be trusted, moved aside
	// (to "<file>.corrupt"); their claims count as not prepared.
	Corrupt []error
}

// Reconcile brings the node back to what the checkpoints say after a
// restart: completed claims are held again (their devices and counters
// are not handed to anyone else) and keep their partitions, and their CDI
// specs are written again wherever they are missing or differ;
// everything else a claim may have left is removed. It must run before
// the kubelet can call Prepare, and after the pool is published (or the
// held counters are not known).
func (k *Kit) Reconcile(ctx context.Context) (*ReconcileReport, error) {
	logger := klog.FromContext(ctx)
	rep := &ReconcileReport{}
	records, bad, err := k.ckpt.List()
	if err != nil {
		return nil, fmt.Errorf("read checkpoints: %w", err)
	}
	for _, err := range bad {
		var c *CorruptCheckpointError
		if errors.As(err, &c) {
			if qerr := k.ckpt.Quarantine(c.Path); qerr != nil {
				return nil, fmt.Errorf("%v; moving it aside failed: %w", err, qerr)
			}
		}
		logger.Error(err, "Ignoring a corrupt checkpoint; the claim counts as not prepared")
		rep.Corrupt = append(rep.Corrupt, err)
	}

	completed := map[types.UID]*ClaimRecord{}
	for _, rec := range records {
		unlock := k.claimLocks.Lock(rec.UID)
		switch rec.State {
		case PrepareCompleted:
			completed[rec.UID] = rec
			err = k.reserve(rec.UID, rec.Devices, true)
			k.markPrepared(rec)
			rep.Prepared = append(rep.Prepared, rec.UID)
		case PrepareStarted:
			err = k.rollBack(ctx, rec)
			rep.RolledBack = append(rep.RolledBack, rec.UID)
		default:
			err = k.rollBack(ctx, rec)
			rep.Unprepared = append(rep.Unprepared, rec.UID)
		}
		unlock()
		if err != nil {
			return nil, fmt.Errorf("claim %s (%s): %w", rec.UID, rec.State, err)
		}
	}

	existing, err := k.profile.Partitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	for _, p := range existing {
		if k.ownedByAny(p, completed) {
			continue
		}
		if err := k.profile.DestroyPartition(ctx, p); err != nil {
			return nil, fmt.Errorf("destroy partition %s of device %s/%s that no prepared claim owns: %w", p.ID, p.Pool, p.Device, err)
		}
		rep.Destroyed = append(rep.Destroyed, p)
	}

	specs, err := k.cdi.claims()
	if err != nil {
		return nil, fmt.Errorf("list CDI specs: %w", err)
	}
	for _, uid := range specs {
		if completed[uid] != nil {
			continue
		}
		if err := k.cdi.remove(uid); err != nil {
			return nil, err
		}
		rep.RemovedSpecs = append(rep.RemovedSpecs, uid)
	}
	for uid, rec := range completed {
		unlock := k.claimLocks.Lock(uid)
		wrote, err := k.ensureSpec(rec)
		unlock()
		if err != nil {
			return nil, err
		}
		if wrote {
			rep.RewrittenSpecs = append(rep.RewrittenSpecs, uid)
		}
	}
	logger.Info("Reconciled prepared claims", "prepared", len(rep.Prepared), "rolledBack", len(rep.RolledBack),
		"unprepared", len(rep.Unprepared), "destroyedPartitions", len(rep.Destroyed), "removedSpecs", len(rep.RemovedSpecs),
		"rewrittenSpecs", len(rep.RewrittenSpecs), "corruptCheckpoints", len(rep.Corrupt))
	return rep, nil
}

func (k *Kit) ownedByAny(p Partition, completed map[types.UID]*ClaimRecord) bool {
	if p.Claim != "" {
		rec := completed[p.Claim]
		return rec != nil && k.ownedBy(p, rec)
	}
	for _, rec := range completed {
		if k.ownedBy(p, rec) {
			return true
		}
	}
	return false
}

// ensureSpec writes a completed claim's CDI spec from its record unless
// the one on disk is that spec already, and reports whether it wrote.
// The caller holds the claim's lock.
func (k *Kit) ensureSpec(rec *ClaimRecord) (bool, error) {
	if err := k.redecode(rec); err != nil {
		return false, fmt.Errorf("rewrite the CDI spec of prepared claim %s: %w", rec.UID, err)
	}
	devices := k.cdiDevices(rec.UID, rec.Devices)
	if k.cdi.current(rec.UID, devices) {
		return false, nil
	}
	return true, k.cdi.write(rec.UID, devices)
}
