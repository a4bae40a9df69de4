package claimlock

import (
	"testing"
	"time"
)

// TestLockIsPerClaim: a second holder of one claim waits for the first;
// another claim's holder does not; a lock no one holds is gone.
func TestLockIsPerClaim(t *testing.T) {
	var l Locks
	unlockA := l.Lock("a")
	unlockB := l.Lock("b") // another claim: does not wait
	got := make(chan struct{})
	go func() {
		defer close(got)
		l.Lock("a")()
	}()
	for l.Users("a") != 2 {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-got:
		t.Fatal("the second holder of claim a did not wait for the first")
	default:
	}
	unlockA()
	<-got
	unlockB()
	if n := len(l.locks); n != 0 {
		t.Errorf("%d locks left with no one holding them", n)
	}
	if n := l.Users("a"); n != 0 {
		t.Errorf("claim a has %d users after every release", n)
	}
}
