//go:build matrix

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dractl/dractl/e2e/framework"
	"github.com/dractl/dractl/e2e/matrix"
)

// skewRule is the words of kube-scheduler's version skew policy that
// dractl-scheduler gives when it refuses a server (scheduler/app).
const skewRule = "kube-scheduler must not be newer than kube-apiserver; it may be up to one minor older"

// matrixSchedulers are the dractl-scheduler builds the matrix runs: each
// minor's binary, as make scheduler and make scheduler-1.38 build them.
func matrixSchedulers(t *testing.T, bin string) map[int]string {
	t.Helper()
	b138 := filepath.Join(bin, "dractl-scheduler-1.38")
	if _, err := os.Stat(b138); err != nil {
		t.Fatalf("the matrix runs the 1.38 build of dractl-scheduler: %v (make scheduler-1.38)", err)
	}
	return map[int]string{37: schedulerBuild.build(t), 38: b138}
}

// matrixScheduler runs each dractl-scheduler build against the server as
// its process would run in a cluster: one the skew policy allows (the
// server's minor or one newer) schedules a pod with a claim, which ends
// bound with its claim allocated and reserved for it; any other exits at
// start with the rule, before it schedules anything.
func matrixScheduler(t *testing.T, c *matrix.Cluster, kc string, schedulers map[int]string) {
	ctx := t.Context()
	for minor, binary := range schedulers {
		t.Run(fmt.Sprintf("dractl-scheduler-1.%d", minor), func(t *testing.T) {
			cfg, err := framework.SchedulerConfig(filepath.Join(repo, "deploy", "scheduler", "config.yaml"), kc, 0, 0, t.TempDir(), false)
			if err != nil {
				t.Fatal(err)
			}
			allowed := c.Minor == minor || c.Minor == minor+1
			claimName, podName := fmt.Sprintf("sched-1-%d", minor), fmt.Sprintf("sched-1-%d", minor)
			if allowed {
				cl := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: claimName}, Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
					Requests: []resourcev1.DeviceRequest{{Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: plainDriver, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}}}
				if _, err := c.Client.ResourceV1().ResourceClaims("default").Create(ctx, cl, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				pod := podSpec(podName, "", corev1.PodResourceClaim{Name: "dev", ResourceClaimName: ptr.To(claimName)})
				pod.Spec.SchedulerName = "dractl"
				if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			p := startProcess(t, binary, "--config", cfg, "--secure-port", "0", "--v", "2")
			if !allowed {
				select {
				case err := <-p.exited:
					if err == nil || !strings.Contains(p.stderr(), skewRule) || !strings.Contains(p.stderr(), c.Release) {
						t.Errorf("dractl-scheduler 1.%d against kube-apiserver %s exited with %v; want a refusal naming %s and the rule %q; stderr:\n%s", minor, c.Release, err, c.Release, skewRule, matrix.Tail(p.stderr(), 3000))
					}
				case <-time.After(time.Minute):
					t.Errorf("dractl-scheduler 1.%d still runs against kube-apiserver %s after a minute; the skew policy forbids it", minor, c.Release)
				}
				return
			}
			waitFor(t, time.Minute, fmt.Sprintf("dractl-scheduler 1.%d to bind pod %s", minor, podName), func(ctx context.Context) (bool, error) {
				select {
				case err := <-p.exited:
					return false, fmt.Errorf("dractl-scheduler 1.%d exited: %v; stderr:\n%s", minor, err, matrix.Tail(p.stderr(), 3000))
				default:
				}
				pod, err := c.Client.CoreV1().Pods("default").Get(ctx, podName, metav1.GetOptions{})
				return err == nil && pod.Spec.NodeName != "", err
			})
			claim, err := c.Client.ResourceV1().ResourceClaims("default").Get(ctx, claimName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 || len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].Name != podName {
				t.Errorf("claim %s after dractl-scheduler 1.%d bound its pod at %s: allocation %+v, reservedFor %+v", claimName, minor, c.Release, claim.Status.Allocation, claim.Status.ReservedFor)
			}
		})
	}
}

// process is a program the test started and stops at its end.
type process struct {
	exited <-chan error
	out    syncBuffer
}

func (p *process) stderr() string { return p.out.String() }

func startProcess(t *testing.T, binary string, args ...string) *process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, binary, args...)
	p := &process{}
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	p.exited = exited
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		exited <- err
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return p
}
