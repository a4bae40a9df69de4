package upstreamsuite

import (
	"strings"
	"testing"
	"time"
)

// A go test -json stream with a group, a passing case run twice (the
// smaller time counts), a case failing in its second run, a skipped case
// and a case whose binary died before it ended.
const stream = `{"Action":"run","Test":"TestAllocator"}
{"Action":"run","Test":"TestAllocator/a"}
{"Action":"output","Test":"TestAllocator/a","Output":"    adapter_test.go:1: I] DRACTL_ELAPSED_NS=3000000\n"}
{"Action":"pass","Test":"TestAllocator/a","Elapsed":0.01}
{"Action":"run","Test":"TestAllocator/a"}
{"Action":"output","Test":"TestAllocator/a","Output":"    adapter_test.go:1: I] DRACTL_ELAPSED_NS=1000000\n"}
{"Action":"pass","Test":"TestAllocator/a","Elapsed":0}
{"Action":"run","Test":"TestAllocator/b"}
{"Action":"pass","Test":"TestAllocator/b","Elapsed":0}
{"Action":"run","Test":"TestAllocator/b"}
{"Action":"output","Test":"TestAllocator/b","Output":"expected 2, got 3\n"}
{"Action":"fail","Test":"TestAllocator/b","Elapsed":0}
{"Action":"run","Test":"TestAllocator/interrupt"}
{"Action":"run","Test":"TestAllocator/interrupt/off"}
{"Action":"skip","Test":"TestAllocator/interrupt/off","Elapsed":0}
{"Action":"pass","Test":"TestAllocator/interrupt","Elapsed":0}
{"Action":"run","Test":"TestAllocator/c"}
{"Action":"output","Test":"TestAllocator/c","Output":"panic: boom\n"}
{"Action":"fail","Test":"TestAllocator","Elapsed":1}
`

func TestParse(t *testing.T) {
	rep, err := parse(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Case{}
	var names []string
	for _, c := range rep.Cases {
		got[c.Name] = c
		names = append(names, c.Name)
	}
	if want := "a b c interrupt/off"; strings.Join(names, " ") != want {
		t.Fatalf("cases %q, want %q (groups are not cases)", strings.Join(names, " "), want)
	}
	a := got["a"]
	if a.Result != "pass" || a.Runs != 2 || a.Dractl != time.Millisecond || a.First != 3*time.Millisecond {
		t.Errorf("a = %+v, want pass, 2 runs, best 1ms, first 3ms", a)
	}
	if b := got["b"]; b.Result != "fail" || !strings.Contains(b.Output, "expected 2, got 3") {
		t.Errorf("b = %+v, want a failure with its output", b)
	}
	if c := got["c"]; c.Result != "fail" {
		t.Errorf("c = %+v, want a failure: it never ended", c)
	}
	if rep.Count("pass") != 1 || rep.Count("fail") != 2 || rep.Count("skip") != 1 {
		t.Errorf("counts pass %d fail %d skip %d", rep.Count("pass"), rep.Count("fail"), rep.Count("skip"))
	}
	if w := rep.Slowest(func(c Case) time.Duration { return c.First }); w.Name != "a" {
		t.Errorf("slowest first run %q, want a", w.Name)
	}
}
