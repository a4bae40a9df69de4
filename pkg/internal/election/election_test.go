package election

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

func TestWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      Config
		want    Config // Identity checked apart: it is random when unset
		wantErr string
	}{{
		name:    "namespace required",
		in:      Config{Name: "x"},
		wantErr: "namespace must be set",
	}, {
		name: "zero fields defaulted",
		in:   Config{Namespace: "ns"},
		want: Config{Namespace: "ns", Name: "component", LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second},
	}, {
		name: "given fields kept",
		in:   Config{Namespace: "ns", Name: "lease", Identity: "me", LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: time.Millisecond},
		want: Config{Namespace: "ns", Name: "lease", Identity: "me", LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: time.Millisecond},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.WithDefaults("component")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Identity == "" {
				t.Fatal("no identity")
			}
			if tc.want.Identity == "" {
				tc.want.Identity = got.Identity
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Of two replicas, the second does not lead while the first holds the
// Lease; when the first stops competing the second takes over, and each
// one's done channel closes when its context ends. (The second starts
// once the first leads: the fake clientset has no optimistic concurrency,
// so two replicas creating the Lease at once would both succeed. The
// Lease records its duration in whole seconds, hence 2 s.)
func TestStartOneLeaderAndTakeOver(t *testing.T) {
	client := fake.NewClientset()
	leads := make(chan string, 4)
	start := func(ctx context.Context, id string) <-chan struct{} {
		c, err := Config{Namespace: "ns", Identity: id, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 20 * time.Millisecond}.WithDefaults("lease")
		if err != nil {
			t.Fatal(err)
		}
		done, err := Start(ctx, client.CoordinationV1(), c, func(context.Context) { leads <- id }, func() {})
		if err != nil {
			t.Fatal(err)
		}
		return done
	}
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelA()
	defer cancelB()
	doneA := start(ctxA, "a")
	if got := <-leads; got != "a" {
		t.Fatalf("%s leads, want a", got)
	}
	doneB := start(ctxB, "b")
	select {
	case got := <-leads:
		t.Fatalf("%s leads while a holds the Lease", got)
	case <-time.After(time.Second):
	}
	cancelA()
	<-doneA
	if got := <-leads; got != "b" {
		t.Fatalf("after a stopped, %s leads, want b", got)
	}
	cancelB()
	<-doneB
}
