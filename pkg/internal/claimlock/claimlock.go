// Package claimlock serializes work per ResourceClaim: the driver's
// prepare and unprepare of one claim, the scheduler plugin's writes of
// one claim. A claim's lock exists only while someone holds or waits for
// it, so a long-lived process does not keep one per claim it ever saw.
package claimlock

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Locks is a lock per claim UID. The zero value is ready to use.
type Locks struct {
	mu    sync.Mutex
	locks map[types.UID]*lock
}

type lock struct {
	sync.Mutex
	// users hold or wait for the lock (guarded by Locks.mu).
	users int
}

// Lock waits for the claim's lock and returns its release.
func (l *Locks) Lock(uid types.UID) (unlock func()) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[types.UID]*lock{}
	}
	c := l.locks[uid]
	if c == nil {
		c = &lock{}
		l.locks[uid] = c
	}
	c.users++
	l.mu.Unlock()
	c.Lock()
	return func() {
		c.Unlock()
		l.mu.Lock()
		if c.users--; c.users == 0 {
			delete(l.locks, uid)
		}
		l.mu.Unlock()
	}
}

// Users counts who hold or wait for the claim's lock.
func (l *Locks) Users(uid types.UID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.locks[uid]; c != nil {
		return c.users
	}
	return 0
}
