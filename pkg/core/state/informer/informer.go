// Package informer connects client-go informers to a state.State: the
// one adapter that long-running components (the scheduler plugin, the
// pool monitor) feed their State through, so that every one of them
// unwraps tombstones, reports refused deltas and handles a refused
// registration alike. It is apart from pkg/ops/live, whose readers and
// snapshots a scheduler does not need.
package informer

import (
	"errors"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/dractl/dractl/pkg/core/api"
	"github.com/dractl/dractl/pkg/core/state"
)

// Deltas turn the events of an informer of objects of type T into deltas
// of a state.State.
//
// A delta the State refuses is logged as an error, with the object and
// why: objects the API server stored can still contradict each other (two
// schedulers allocating one device), and a refusal leaves the State
// without what the cluster has. A deleted object the State does not hold
// was refused when it was set, which was logged then; its deletion is
// logged at V(4).
type Deltas[T metav1.Object] struct {
	// Kind names the objects in log messages ("ResourceSlice").
	Kind string
	// Set applies an added or updated object, Delete a deleted one.
	Set, Delete func(T) error
	// Then, if set, runs after every event has been applied (or refused,
	// and logged): the caller notes what changed.
	Then func(Delta[T])
	// Unread, if set, names fields the object was stored with that this
	// build's types cannot hold (version skew); such an object is logged,
	// since what the State makes of it (an invalid pool) says why only
	// where a component reports it.
	Unread func(T) []string
}

// Delta is one informer event as the State took it.
type Delta[T any] struct {
	// Obj is the object the event is about; Old is, for an update, the
	// object before (the zero value otherwise).
	Obj, Old T
	// Deleted: the event was a deletion.
	Deleted bool
	// Err is the State's refusal, already logged; nil when it applied.
	Err error
}

// Slices are the deltas of ResourceSlice events to st.
func Slices(st *state.State) Deltas[*resourcev1.ResourceSlice] {
	return Deltas[*resourcev1.ResourceSlice]{Kind: "ResourceSlice", Set: st.SetSlice,
		Delete: func(s *resourcev1.ResourceSlice) error { return st.DeleteSlice(s.Name) },
		Unread: func(s *resourcev1.ResourceSlice) []string { return api.UnreadFields(s.ManagedFields) }}
}

// Classes are the deltas of DeviceClass events to st.
func Classes(st *state.State) Deltas[*resourcev1.DeviceClass] {
	return Deltas[*resourcev1.DeviceClass]{Kind: "DeviceClass", Set: st.SetClass,
		Delete: func(c *resourcev1.DeviceClass) error { return st.DeleteClass(c.Name) }}
}

// Claims are the deltas of ResourceClaim events to st.
func Claims(st *state.State) Deltas[*resourcev1.ResourceClaim] {
	return Deltas[*resourcev1.ResourceClaim]{Kind: "ResourceClaim", Set: st.SetClaim,
		Delete: func(c *resourcev1.ResourceClaim) error { return st.DeleteClaim(c.Namespace, c.Name) }}
}

// TaintRules are the deltas of DeviceTaintRule events to st.
func TaintRules(st *state.State) Deltas[*resourcev1.DeviceTaintRule] {
	return Deltas[*resourcev1.DeviceTaintRule]{Kind: "DeviceTaintRule", Set: st.SetTaintRule,
		Delete: func(r *resourcev1.DeviceTaintRule) error { return st.DeleteTaintRule(r.Name) }}
}

// EventSource is what event handlers are registered with: a
// SharedInformer.
type EventSource interface {
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
}

// Watch registers d's handlers with src. The registration tells when the
// handlers have seen what src listed at start (HasSynced); an error means
// src refused them (it was stopped) and no event will reach the State.
func Watch[T metav1.Object](logger klog.Logger, src EventSource, d Deltas[T]) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := src.AddEventHandler(d.Handler(logger))
	if err != nil {
		return nil, fmt.Errorf("watch %s objects: %w", d.Kind, err)
	}
	return reg, nil
}

// Handler returns informer event handlers that apply d. Tombstones of
// deletions the informer missed are unwrapped; an object of another type
// is logged and skipped.
func (d Deltas[T]) Handler(logger klog.Logger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := d.object(logger, obj); ok {
				d.apply(logger, Delta[T]{Obj: o})
			}
		},
		UpdateFunc: func(oldObj, obj any) {
			o, ok := d.object(logger, obj)
			if !ok {
				return
			}
			old, _ := oldObj.(T)
			d.apply(logger, Delta[T]{Obj: o, Old: old})
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := d.object(logger, obj); ok {
				d.apply(logger, Delta[T]{Obj: o, Deleted: true})
			}
		},
	}
}

func (d Deltas[T]) object(logger klog.Logger, obj any) (T, bool) {
	o, ok := obj.(T)
	if !ok {
		logger.Error(nil, "Informer delivered an object of an unexpected type; not applied to the allocation state", "kind", d.Kind, "type", fmt.Sprintf("%T", obj))
	}
	return o, ok
}

func (d Deltas[T]) apply(logger klog.Logger, ev Delta[T]) {
	if d.Unread != nil && !ev.Deleted {
		if unread := d.Unread(ev.Obj); len(unread) > 0 {
			logger.Error(nil, "Object holds fields this build cannot read; what it describes is not used", "kind", d.Kind, "object", klog.KObj(ev.Obj), "fields", unread)
		}
	}
	if ev.Deleted {
		ev.Err = d.Delete(ev.Obj)
	} else {
		ev.Err = d.Set(ev.Obj)
	}
	var notFound *state.NotFoundError
	switch {
	case ev.Err == nil:
	case ev.Deleted && errors.As(ev.Err, &notFound):
		logger.V(4).Info("Deleted object was not in the allocation state", "kind", d.Kind, "object", klog.KObj(ev.Obj), "err", ev.Err)
	default:
		logger.Error(ev.Err, "Not applied to the allocation state", "kind", d.Kind, "object", klog.KObj(ev.Obj), "deleted", ev.Deleted)
	}
	if d.Then != nil {
		d.Then(ev)
	}
}
