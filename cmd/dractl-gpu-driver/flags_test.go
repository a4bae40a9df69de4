package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dractl/dractl/pkg/driver/driverkit"
)

// TestFlags: the backend is chosen by --backend, and flags of the other
// backend are refused rather than ignored.
func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		backend string
		err     string
	}{
		{[]string{"--node-name=n"}, "mock", ""},
		{[]string{"--node-name=n", "--backend=nvml"}, "nvml", ""},
		{[]string{"--node-name=n", "--backend=nvml", "--nvml-mock=dgxa100"}, "nvml", ""},
		{[]string{"--node-name=n", "--backend=cuda"}, "", "--backend=cuda: want one of mock, nvml"},
		{[]string{"--node-name=n", "--backend=nvml", "--gpus=4"}, "", "--gpus applies to --backend=mock only"},
		{[]string{"--node-name=n", "--nvml-mock=dgxa100"}, "", "apply to --backend=nvml only"},
		{[]string{"--node-name=n", "--nvml-dev-root=/run/nvidia/driver"}, "", "apply to --backend=nvml only"},
		{[]string{"--node-name=n", "--backend=nvml", "--nvml-dev-root=/run/nvidia/driver"}, "nvml", ""},
		{[]string{"--node-name=", "--backend=nvml"}, "", "--node-name (or $NODE_NAME) is required"},
		{[]string{"--node-name=n", "--unhealthy-taint-effect=NoExecute"}, "mock", ""},
		{[]string{"--node-name=n", "--unhealthy-taint-effect=PreferNoSchedule"}, "", "want NoSchedule or NoExecute"},
		{[]string{"--node-name=n", "--health-interval=0s"}, "", "want a positive duration"},
		{[]string{"--node-name=n", "--metrics-auth"}, "", "--metrics-auth needs --metrics-bind-address"},
		{[]string{"--node-name=n", "--metrics-auth", "--metrics-bind-address=:9400"}, "mock", ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var o Options
			fs := flag.NewFlagSet("dractl-gpu-driver", flag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := o.Complete(fs)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("Complete: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("Complete: %v, want %q", err, tc.err)
			case tc.err == "" && o.Backend != tc.backend:
				t.Fatalf("backend %s, want %s", o.Backend, tc.backend)
			}
		})
	}
}

// usage is the driver's -help, with the flag set it was printed for.
func usage(o *Options) (string, *flag.FlagSet) {
	fs := flag.NewFlagSet("dractl-gpu-driver", flag.ContinueOnError)
	var help strings.Builder
	fs.SetOutput(&help)
	o.AddFlags(fs)
	fs.Usage()
	return help.String(), fs
}

// TestHiddenFlag: the test-only flag works but is not in -help.
func TestHiddenFlag(t *testing.T) {
	var o Options
	help, fs := usage(&o)
	if strings.Contains(help, "nvml-mock") || !strings.Contains(help, "-backend") {
		t.Errorf("help:\n%s", help)
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse([]string{"--nvml-mock=dgxh100"}); err != nil || o.NVMLMock != "dgxh100" {
		t.Fatalf("--nvml-mock: %v %q", err, o.NVMLMock)
	}
}

// TestHealthTaintFlags: the taint flags reach the kit's options.
func TestHealthTaintFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want driverkit.HealthTaints
	}{
		{nil, driverkit.HealthTaints{Notices: true}},
		{[]string{"--unhealthy-taint-effect=NoExecute"}, driverkit.HealthTaints{Evict: true, Notices: true}},
		{[]string{"--health-taints=false", "--health-notice-taints=false"}, driverkit.HealthTaints{Disabled: true}},
	} {
		var o Options
		fs := flag.NewFlagSet("dractl-gpu-driver", flag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(append([]string{"--node-name=n"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		if err := o.Complete(fs); err != nil {
			t.Fatal(err)
		}
		if o.Kit.HealthTaints != tc.want || o.Kit.HealthInterval != 10*time.Second {
			t.Errorf("%v: %+v every %s, want %+v every 10s", tc.args, o.Kit.HealthTaints, o.Kit.HealthInterval, tc.want)
		}
	}
}

// TestHelpDefaults: each flag's help gives its default once: a flag that
// says its own ($NODE_NAME, a directory the driver name decides) gets no
// second, and an empty default none.
func TestHelpDefaults(t *testing.T) {
	t.Setenv("NODE_NAME", "")
	help, _ := usage(&Options{})
	for _, line := range strings.Split(help, "\n") {
		if strings.Count(line, "(default ") > 1 || strings.Contains(line, `(default "")`) {
			t.Errorf("help line %q", line)
		}
	}
	for _, want := range []string{"name of this node (default $NODE_NAME)\n", `GPU backend: mock (GPUs simulated in the state directory) or nvml (the node's NVIDIA GPUs through NVML) (default "mock")`} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
}
