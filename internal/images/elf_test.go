package images

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dractl/dractl/internal/ociimage"
)

// hostTree is a tree of the host files given, by image path.
func hostTree(t *testing.T, files map[string]string) Tree {
	t.Helper()
	tree := Tree{"/": {Dir: true, Mode: 0o755}}
	for p, src := range files {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		tree[p] = Node{Mode: 0o755, Data: data}
		for d := p[:strings.LastIndex(p, "/")]; d != ""; d = d[:strings.LastIndex(d, "/")] {
			tree[d] = Node{Dir: true, Mode: 0o755}
		}
	}
	return tree
}

func TestLookup(t *testing.T) {
	tree := Tree{
		"/":              {Dir: true},
		"/usr":           {Dir: true},
		"/usr/lib":       {Dir: true},
		"/usr/lib/x":     {Data: []byte("x")},
		"/lib":           {Link: "usr/lib"},
		"/lib64":         {Link: "/usr/lib"},
		"/usr/lib/rel":   {Link: "../lib/x"},
		"/usr/lib/chain": {Link: "/lib/rel"},
		"/loop":          {Link: "/loop"},
		"/file":          {Data: []byte("f")},
	}
	for p, want := range map[string]string{
		"/usr/lib/x":      "/usr/lib/x",
		"/lib/x":          "/usr/lib/x",
		"/lib64/x":        "/usr/lib/x",
		"/lib/rel":        "/usr/lib/x",
		"/lib64/chain":    "/usr/lib/x",
		"/usr/../lib/./x": "/usr/lib/x",
	} {
		n, got, err := tree.Lookup(p)
		if err != nil || got != want || string(n.Data) != "x" {
			t.Errorf("Lookup(%q) = %q, %q, %v; want %q", p, got, n.Data, err, want)
		}
	}
	for p, want := range map[string]string{
		"/lib/y":    "/usr/lib/y: file does not exist in the image",
		"/loop":     "/loop: more than 40 symbolic links",
		"/file/sub": "/file: not a directory in the image",
	} {
		if _, _, err := tree.Lookup(p); err == nil || err.Error() != want {
			t.Errorf("Lookup(%q): %v, want %q", p, err, want)
		}
	}
}

// TestLibraries resolves a host program's loader and libraries in trees
// that hold them where the loader searches and where it does not.
func TestLibraries(t *testing.T) {
	const (
		bin    = "/usr/bin/true"
		loader = "/lib64/ld-linux-x86-64.so.2"
		libc   = "/lib/x86_64-linux-gnu/libc.so.6"
	)
	ok := hostTree(t, map[string]string{bin: bin, loader: loader, libc: libc})
	got, err := ok.Libraries(bin)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{loader, libc}; !slices.Equal(got, want) {
		t.Errorf("Libraries = %v, want %v", got, want)
	}

	// The loader's second system directory serves as well.
	usr := hostTree(t, map[string]string{bin: bin, loader: loader, "/usr/lib/x86_64-linux-gnu/libc.so.6": libc})
	if _, err := usr.Libraries(bin); err != nil {
		t.Errorf("libc in /usr/lib/x86_64-linux-gnu: %v", err)
	}

	for name, tc := range map[string]struct {
		tree Tree
		want string
	}{
		"no loader": {hostTree(t, map[string]string{bin: bin, libc: libc}),
			"/usr/bin/true: its loader: /lib64: file does not exist in the image"},
		"no libc": {hostTree(t, map[string]string{bin: bin, loader: loader}),
			"/usr/bin/true needs libc.so.6: found in none of /lib/x86_64-linux-gnu, /usr/lib/x86_64-linux-gnu, /lib, /usr/lib in the image"},
		"libc off the search path": {hostTree(t, map[string]string{bin: bin, loader: loader, "/opt/lib/libc.so.6": libc}),
			"/usr/bin/true needs libc.so.6: found in none of"},
		"libc not an ELF object": {hostTree(t, map[string]string{bin: bin, loader: loader, libc: "/etc/passwd"}),
			"/usr/bin/true needs libc.so.6: found in none of"},
		"loader not an ELF object": {hostTree(t, map[string]string{bin: bin, loader: "/etc/passwd", libc: libc}),
			"/usr/bin/true: its loader /lib64/ld-linux-x86-64.so.2:"},
	} {
		if _, err := tc.tree.Libraries(bin); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}

	// A program without PT_INTERP (the loader is one) loads nothing.
	static := hostTree(t, map[string]string{"/x": loader})
	if libs, err := static.Libraries("/x"); err != nil || libs != nil {
		t.Errorf("a static binary: %v, %v; want nothing", libs, err)
	}
	if libs, err := CLibrary(loader); err != nil || libs != nil {
		t.Errorf("CLibrary of a static binary: %v, %v; want nothing", libs, err)
	}
}

// TestCLibrary takes a host program's C library from this machine: the
// loader, the libraries it links, the rest of their package beside them
// and its copyright, which together load it in an image.
func TestCLibrary(t *testing.T) {
	files, err := CLibrary("/usr/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]ociimage.File{}
	for _, f := range files {
		byPath[f.Path] = f
	}
	for _, p := range []string{
		"/lib64/ld-linux-x86-64.so.2",
		"/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
		"/lib/x86_64-linux-gnu/libc.so.6",
		// Not linked by true, but by what a cgo binary opens at run
		// time: the package comes whole.
		"/lib/x86_64-linux-gnu/libm.so.6",
		"/lib/x86_64-linux-gnu/libpthread.so.0",
		"/lib/x86_64-linux-gnu/libdl.so.2",
		"/usr/share/doc/libc6/copyright",
	} {
		if _, ok := byPath[p]; !ok {
			t.Errorf("CLibrary has no %s; it has %v", p, paths(files))
		}
	}
	if l := byPath["/lib64/ld-linux-x86-64.so.2"].Link; l != "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" {
		t.Errorf("the loader's path is a link to %q, want Debian's link to /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", l)
	}
	for _, f := range files {
		if !strings.Contains(f.Path, ".so") && !strings.HasSuffix(f.Path, "/copyright") {
			t.Errorf("CLibrary has %s, which is no shared object", f.Path)
		}
	}

	// In an image, they load the program.
	img, err := ociimage.Build(ociimage.Spec{
		Files:      append(files, ociimage.File{Path: "/true", Source: "/usr/bin/true"}),
		Entrypoint: []string{"/true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := FilesOf(img)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.Libraries("/true"); err != nil {
		t.Error(err)
	}
}

func paths(files []ociimage.File) []string {
	var ps []string
	for _, f := range files {
		ps = append(ps, f.Path)
	}
	return ps
}
