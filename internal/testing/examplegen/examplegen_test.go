package examplegen

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated files under examples/")

const examplesDir = "../../../examples"

// TestExamplesUpToDate is the golden test of the generated examples. It
// also fails on a generated file that Files no longer produces, so that a
// renamed example does not leave a stale copy behind.
func TestExamplesUpToDate(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	want := make(map[string]bool)
	for _, f := range files {
		want[filepath.FromSlash(f.Path)] = true
		path := filepath.Join(examplesDir, filepath.FromSlash(f.Path))
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%v; run go test ./internal/testing/examplegen -update", err)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("examples/%s is out of date (first difference at line %d); run go test ./internal/testing/examplegen -update",
				f.Path, firstDiffLine(got, f.Data))
		}
	}
	err = filepath.WalkDir(examplesDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(examplesDir, path)
		if want[rel] {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(data, []byte(GeneratedHeader)) {
			return nil
		}
		if *update {
			return os.Remove(path)
		}
		t.Errorf("examples/%s is generated but no longer produced by Files; run go test ./internal/testing/examplegen -update", rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func firstDiffLine(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// TestTPUPool checks the multi-host pool of KEP-4815 with its typos fixed:
// one counter set, every consumption from it, per-device node selection
// matching the hosts counted.
func TestTPUPool(t *testing.T) {
	ss := TPU4x4.Slices()
	if len(ss) != 2 {
		t.Fatalf("%d slices, want 2", len(ss))
	}
	sets := ss[0].Spec.SharedCounters
	if len(sets) != 1 || sets[0].Name != TPUCounterSet || len(sets[0].Counters) != 4 {
		t.Fatalf("counter sets %+v, want one %s with 4 counters", sets, TPUCounterSet)
	}
	devs := ss[1].Spec.Devices
	if len(devs) != 7 {
		t.Fatalf("%d devices, want 7", len(devs))
	}
	for _, d := range devs {
		if len(d.ConsumesCounters) != 1 || d.ConsumesCounters[0].CounterSet != TPUCounterSet {
			t.Errorf("%s consumes %+v", d.Name, d.ConsumesCounters)
			continue
		}
		var hosts []string
		if d.NodeName != nil {
			hosts = []string{*d.NodeName}
		} else {
			hosts = d.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values
		}
		var consumed []string
		for c := range d.ConsumesCounters[0].Counters {
			consumed = append(consumed, c)
		}
		slices.Sort(consumed)
		var want []string
		for _, h := range hosts {
			want = append(want, HostCounter(h))
		}
		slices.Sort(want)
		if !slices.Equal(consumed, want) {
			t.Errorf("%s: runs on %v but consumes %v", d.Name, hosts, consumed)
		}
		tpus := d.Capacity["tpus"].Value
		if tpus.Value() != TPU4x4.ChipsPerHost*int64(len(hosts)) {
			t.Errorf("%s: %s tpus over %d hosts", d.Name, tpus.String(), len(hosts))
		}
	}
}
