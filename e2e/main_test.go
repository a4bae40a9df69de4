package e2e

import (
	"flag"
	"io"
	"os"
	"testing"

	"k8s.io/klog/v2"
)

// TestMain silences klog, which kube-apiserver and the controllers log
// to at length, unless E2E_KLOG is set; test failures carry what matters.
func TestMain(m *testing.M) {
	if os.Getenv("E2E_KLOG") == "" {
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	}
	code := m.Run()
	for _, b := range []*treeBinary{driverBinary, publisherBinary, schedulerBuild} {
		if b.tmp != "" {
			os.RemoveAll(b.tmp)
		}
	}
	os.Exit(code)
}
