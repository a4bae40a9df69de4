package simulate

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dractl/dractl/pkg/core/allocator"
	"github.com/dractl/dractl/pkg/core/coretest"
	"github.com/dractl/dractl/pkg/ops/render"
)

// chromium finds headless Chromium. The report test needs a real browser:
// .ci/run and `make test` install Debian's chromium package.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("headless Chromium not found: install Debian's chromium package (make chromium)")
	return ""
}

// runChromium runs headless Chromium with the flags this sandbox needs:
// no sandbox (root), no GPU, and no background networking (there is no
// network to reach).
func runChromium(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, chromium(t), append(base, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errOut.String())
	}
	return out.Bytes()
}

// checkScript measures every SVG once the page is laid out and writes the
// result into the DOM, which --dump-dom prints.
const checkScript = `<script>
const out = [];
for (const svg of document.querySelectorAll("svg")) {
  const r = svg.getBoundingClientRect();
  out.push({class: svg.getAttribute("class"), width: r.width, height: r.height,
    shapes: svg.querySelectorAll("rect, polyline").length});
}
document.body.setAttribute("data-check", JSON.stringify(out));
</script>`

// TestHTMLReportInChromium opens the report of a two-node run with
// departures in headless Chromium: every chart and every occupancy
// picture must be laid out with a size and shapes in it, and a screenshot
// must show the charts' lines and the claims' colours.
func TestHTMLReportInChromium(t *testing.T) {
	c := dgxCluster(2)
	s := mustStream(t, migWorkload(3, 150, 20*time.Second, 30*time.Minute))
	rep := &Report{Cluster: Summarize(c), Workload: s.Name, Pods: len(s.Pods)}
	for _, st := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
		res, err := Run(context.Background(), c, s, Options{Strategy: st, Samples: 50, Repacks: 5})
		if err != nil {
			t.Fatal(err)
		}
		if res.FirstFailure == nil {
			t.Fatal("the workload was meant to overflow two nodes")
		}
		rep.Results = append(rep.Results, res)
	}
	var page bytes.Buffer
	if err := rep.WriteHTML(&page, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?i)(src|href)=|@import|url\(`).Find(page.Bytes()); m != nil {
		t.Errorf("the report loads something from elsewhere: %s", m)
	}
	dir := t.TempDir()
	report := filepath.Join(dir, "report.html")
	check := filepath.Join(dir, "check.html")
	coretest.Must(t, os.WriteFile(report, page.Bytes(), 0o644))
	coretest.Must(t, os.WriteFile(check, bytes.Replace(page.Bytes(), []byte("</body>"), []byte(checkScript+"</body>"), 1), 0o644))

	dom := runChromium(t, "--dump-dom", "file://"+check)
	m := regexp.MustCompile(`data-check="([^"]*)"`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the check script did not run; DOM starts:\n%.500s", dom)
	}
	var svgs []struct {
		Class         string
		Width, Height float64
		Shapes        int
	}
	coretest.Must(t, json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &svgs))
	count := map[string]int{}
	for i, svg := range svgs {
		count[svg.Class]++
		if svg.Width < 100 || svg.Height < 50 || svg.Shapes == 0 {
			t.Errorf("svg %d (%s) is laid out %.0fx%.0f with %d shapes", i, svg.Class, svg.Width, svg.Height, svg.Shapes)
		}
	}
	// Four comparison charts (the wait histogram, waiting, running and
	// placed pods), three per strategy (utilisation, stranded, repack); a
	// picture per node at the first failure and at the end, per strategy.
	if want := 4 + 3*len(rep.Results); count["chart"] != want {
		t.Errorf("%d charts rendered, want %d", count["chart"], want)
	}
	if want := len(c.Nodes) * 2 * len(rep.Results); count["occupancy"] != want {
		t.Errorf("%d occupancy pictures rendered, want %d", count["occupancy"], want)
	}

	shot := filepath.Join(dir, "report.png")
	runChromium(t, "--screenshot="+shot, "--window-size=1300,4000", "--hide-scrollbars", "file://"+report)
	f, err := os.Open(shot)
	coretest.Must(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	coretest.Must(t, err)
	lines := hexColors(render.SeriesColors())
	claims := hexColors(render.ClaimColors())
	var ink, lineInk, claimInk int
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			px := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), 255}
			if px != (color.RGBA{255, 255, 255, 255}) {
				ink++
			}
			if lines[px] {
				lineInk++
			}
			if claims[px] {
				claimInk++
			}
		}
	}
	total := b.Dx() * b.Dy()
	t.Logf("screenshot %dx%d: %d non-white, %d in line colours, %d in claim colours", b.Dx(), b.Dy(), ink, lineInk, claimInk)
	if ink < total/50 || lineInk < 200 || claimInk < 200 {
		t.Errorf("the screenshot looks blank or unstyled: %d of %d pixels not white, %d in chart line colours, %d in claim colours", ink, total, lineInk, claimInk)
	}
}

// TestPlanReportInChromium opens a nodes-needed search's page: the curve
// is laid out with a line per strategy and the bound.
func TestPlanReportInChromium(t *testing.T) {
	base, tmpl, s := exampleDGX(t)
	rep := &PlanReport{Template: tmpl.Node.Name, Workload: s.Name, Pods: len(s.Pods), MaxWait: 300}
	for _, st := range []allocator.Strategy{allocator.FirstFit, allocator.BestFit} {
		plan, err := NodesNeeded(context.Background(), base, tmpl, s, PlanOptions{MaxWait: 5 * time.Minute, Run: Options{Strategy: st, Samples: 10}})
		if err != nil {
			t.Fatal(err)
		}
		rep.Plans = append(rep.Plans, plan)
	}
	var page bytes.Buffer
	coretest.Must(t, rep.WriteHTML(&page))
	check := filepath.Join(t.TempDir(), "check.html")
	coretest.Must(t, os.WriteFile(check, bytes.Replace(page.Bytes(), []byte("</body>"), []byte(checkScript+"</body>"), 1), 0o644))
	m := regexp.MustCompile(`data-check="([^"]*)"`).FindSubmatch(runChromium(t, "--dump-dom", "file://"+check))
	if m == nil {
		t.Fatal("the check script did not run")
	}
	var svgs []struct {
		Class         string
		Width, Height float64
		Shapes        int
	}
	coretest.Must(t, json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &svgs))
	// One polyline per strategy and one for the bound.
	if len(svgs) != 1 || svgs[0].Width < 100 || svgs[0].Height < 50 || svgs[0].Shapes < len(rep.Plans)+1 {
		t.Errorf("the nodes-needed curve is laid out as %+v", svgs)
	}
}

func hexColors(hex []string) map[color.RGBA]bool {
	out := map[color.RGBA]bool{}
	for _, h := range hex {
		v, err := strconv.ParseUint(strings.TrimPrefix(h, "#"), 16, 32)
		if err == nil {
			out[color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255}] = true
		}
	}
	return out
}
