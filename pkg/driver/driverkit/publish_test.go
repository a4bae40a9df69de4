package driverkit_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dractl/dractl/internal/testing/drivertest"
	"github.com/dractl/dractl/pkg/driver/driverkit"
	"github.com/dractl/dractl/pkg/driver/prepare"
)

// TestStartRefusesInvalidPoolWithEvent: the driver does not start with an
// invalid pool, and the Node gets a Warning event saying why. (A fake
// clientset: this is the error path, nothing is published.)
func TestStartRefusesInvalidPoolWithEvent(t *testing.T) {
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	e := newEnv(t)
	pool := e.GPUs.Pool()
	pool[1].Spec.Devices[0].ConsumesCounters[0].CounterSet = "missing"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := driverkit.Start(ctx, driverkit.Options{
		Config:   prepare.Config{DriverName: driver, Profile: e.GPUs, StateDir: e.Dir, CDIDir: filepath.Join(e.Dir, "cdi")},
		NodeName: node, KubeClient: client, RegistrarDir: t.TempDir(), PluginDir: t.TempDir(), Server: drivertest.FakeServer,
	}, pool)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("start: %v", err)
	}
	var ev *corev1.Event
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		ev = &list.Items[0]
		return true, nil
	}); err != nil {
		t.Fatalf("no event: %v", err)
	}
	if ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.Name != node || ev.Type != corev1.EventTypeWarning ||
		ev.Reason != driverkit.EventReasonInvalidPool || !strings.Contains(ev.Message, "missing") {
		t.Fatalf("event %+v", ev)
	}
}
