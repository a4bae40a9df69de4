package images

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"regexp"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/dractl/dractl/internal/ociimage"
)

// Node is one entry of an image's filesystem.
type Node struct {
	Dir  bool
	Link string
	Mode int64
	Data []byte
}

// Tree is an image's filesystem, by absolute clean path.
type Tree map[string]Node

// FilesOf reads the filesystem of img from its layers, a later layer's
// entry replacing an earlier one's.
func FilesOf(img v1.Image) (Tree, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	tree := Tree{"/": {Dir: true, Mode: 0o755}}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		err = readLayer(tree, rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return tree, nil
}

func readLayer(tree Tree, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		p := path.Clean("/" + hdr.Name)
		if strings.HasPrefix(path.Base(p), ".wh.") {
			return fmt.Errorf("%s: whiteouts are not read here", p)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			tree[p] = Node{Dir: true, Mode: hdr.Mode}
		case tar.TypeSymlink:
			tree[p] = Node{Link: hdr.Linkname, Mode: hdr.Mode}
		case tar.TypeLink:
			target, ok := tree[path.Clean("/"+hdr.Linkname)]
			if !ok {
				return fmt.Errorf("%s: hard link to %s, which comes before it nowhere", p, hdr.Linkname)
			}
			tree[p] = target
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			tree[p] = Node{Mode: hdr.Mode, Data: data}
		default:
			return fmt.Errorf("%s: entry type %q is not read here", p, hdr.Typeflag)
		}
	}
}

// maxLinks bounds the symbolic links one lookup follows, as Linux does.
const maxLinks = 40

// Lookup finds p in the tree, following symbolic links in every component
// as the kernel does inside the container's root, and returns the entry
// and its resolved path.
func (t Tree) Lookup(p string) (Node, string, error) {
	links := 0
	rest := strings.Split(strings.Trim(path.Clean("/"+p), "/"), "/")
	cur := "/"
	for len(rest) > 0 {
		part := rest[0]
		rest = rest[1:]
		if part == "" || part == "." {
			continue
		}
		if part == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, part)
		n, ok := t[next]
		if !ok {
			return Node{}, "", fmt.Errorf("%s: %w in the image", next, fs.ErrNotExist)
		}
		if n.Link == "" {
			if len(rest) > 0 && !n.Dir {
				return Node{}, "", fmt.Errorf("%s: not a directory in the image", next)
			}
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return Node{}, "", fmt.Errorf("%s: more than %d symbolic links", p, maxLinks)
		}
		target := strings.Split(strings.Trim(n.Link, "/"), "/")
		if path.IsAbs(n.Link) {
			cur = "/"
		}
		rest = append(target, rest...)
	}
	return t[cur], cur, nil
}

// Libraries returns the shared objects the dynamically linked binary at
// p loads in the tree, resolved as its loader resolves them: the
// interpreter its PT_INTERP names, then every DT_NEEDED entry, of the
// binary and of each object it loads, found by an object already loaded
// under that soname, in the object's DT_RPATH or DT_RUNPATH, or in the
// loader's system search path (the tree has no /etc/ld.so.cache). A
// statically linked binary loads nothing.
func (t Tree) Libraries(p string) ([]string, error) {
	n, resolved, err := t.Lookup(p)
	if err != nil {
		return nil, err
	}
	bin, err := elf.NewFile(bytes.NewReader(n.Data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	interp, err := interpreter(bin)
	if err != nil || interp == "" {
		return nil, err
	}
	in, interpPath, err := t.Lookup(interp)
	if err != nil {
		return nil, fmt.Errorf("%s: its loader: %w", p, err)
	}
	ld, err := elf.NewFile(bytes.NewReader(in.Data))
	if err != nil {
		return nil, fmt.Errorf("%s: its loader %s: %w", p, interp, err)
	}
	if err := sameTarget(bin, ld); err != nil {
		return nil, fmt.Errorf("%s: its loader %s: %w", p, interp, err)
	}
	system, err := systemSearchPath(in.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: its loader %s: %w", p, interp, err)
	}
	loaded := map[string]bool{}
	if names, _ := ld.DynString(elf.DT_SONAME); len(names) > 0 {
		loaded[names[0]] = true
	}
	libs := []string{interpPath}
	type object struct {
		path string
		file *elf.File
	}
	queue := []object{{resolved, bin}}
	for len(queue) > 0 {
		obj := queue[0]
		queue = queue[1:]
		needed, err := obj.file.ImportedLibraries()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", obj.path, err)
		}
		dirs, err := searchDirs(obj.file, obj.path)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, system...)
		for _, name := range needed {
			if loaded[name] {
				continue
			}
			found, file, err := t.findLibrary(name, dirs, bin)
			if err != nil {
				return nil, fmt.Errorf("%s needs %s: %w", obj.path, name, err)
			}
			loaded[name] = true
			if names, _ := file.DynString(elf.DT_SONAME); len(names) > 0 {
				loaded[names[0]] = true
			}
			libs = append(libs, found)
			queue = append(queue, object{found, file})
		}
	}
	return libs, nil
}

// findLibrary looks for the shared object name in dirs, skipping files of
// another class or machine than bin, as the loader does.
func (t Tree) findLibrary(name string, dirs []string, bin *elf.File) (string, *elf.File, error) {
	candidates := []string{name}
	if !strings.Contains(name, "/") {
		candidates = candidates[:0]
		for _, d := range dirs {
			candidates = append(candidates, path.Join(d, name))
		}
	}
	for _, c := range candidates {
		n, resolved, err := t.Lookup(c)
		if err != nil || n.Dir {
			continue
		}
		f, err := elf.NewFile(bytes.NewReader(n.Data))
		if err != nil || sameTarget(bin, f) != nil {
			continue
		}
		return resolved, f, nil
	}
	return "", nil, fmt.Errorf("found in none of %s in the image", strings.Join(dirs, ", "))
}

// searchDirs is an object's own search path, $ORIGIN expanded.
func searchDirs(f *elf.File, objPath string) ([]string, error) {
	var dirs []string
	for _, tag := range []elf.DynTag{elf.DT_RPATH, elf.DT_RUNPATH} {
		vals, err := f.DynString(tag)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", objPath, err)
		}
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", "$ORIGIN"), "$ORIGIN", path.Dir(objPath))
				if d != "" {
					dirs = append(dirs, d)
				}
			}
		}
	}
	return dirs, nil
}

func interpreter(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		data, err := io.ReadAll(p.Open())
		if err != nil {
			return "", fmt.Errorf("PT_INTERP: %w", err)
		}
		return strings.TrimRight(string(data), "\x00"), nil
	}
	return "", nil
}

func sameTarget(a, b *elf.File) error {
	if a.Class != b.Class || a.Machine != b.Machine {
		return fmt.Errorf("%v %v, want %v %v", b.Class, b.Machine, a.Class, a.Machine)
	}
	return nil
}

// systemLine is a directory of the loader's built-in search path in the
// report of glibc's `ld.so --help`.
var systemLine = regexp.MustCompile(`^\s+(/\S*) \(system search path\)$`)

// systemSearchPath asks a loader (glibc's ld.so, 2.33 or later) for the
// directories it searches after the cache: the loader reports them
// itself, so no list of them is kept here. It runs the loader on this
// machine, with nothing in its environment.
func systemSearchPath(loader []byte) ([]string, error) {
	f, err := os.CreateTemp("", "ld-*.so")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(loader); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Chmod(0o755); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	cmd := exec.Command(f.Name(), "--help")
	cmd.Env = []string{}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("--help: %w", err)
	}
	var dirs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := systemLine.FindStringSubmatch(sc.Text()); m != nil {
			dirs = append(dirs, m[1])
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("--help names no system search path (glibc 2.33 or later does):\n%s", out)
	}
	return dirs, nil
}

// listLine is one object of a loader's `--list` report (what ldd
// prints): "name => /path (0x...)", "/path (0x...)" or
// "name => not found".
var listLine = regexp.MustCompile(`^\s*(?:(\S+) => )?(\S+|not found)(?: \(0x[0-9a-f]+\))?$`)

// CLibrary returns the files of the C library the dynamically linked
// binary needs, taken from this machine: the shared objects its own
// loader (PT_INTERP) resolves for it here (`ld.so --list`, which is what
// ldd runs), each at the path the loader found it, and the other shared
// objects that the Debian packages providing them install beside them,
// with the packages' copyright files. The packages come whole because
// what the binary opens at run time (dlopen of the host's
// libnvidia-ml.so.1) needs more of the C library than the binary links
// (libm, libdl, libpthread, librt). A static binary needs none.
func CLibrary(binary string) ([]ociimage.File, error) {
	f, err := elf.Open(binary)
	if err != nil {
		return nil, err
	}
	interp, err := interpreter(f)
	f.Close()
	if err != nil || interp == "" {
		return nil, err
	}
	cmd := exec.Command(interp, "--list", binary)
	cmd.Env = []string{}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list %s: %w: %s", interp, binary, err, stderr.Bytes())
	}
	var objects []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := listLine.FindStringSubmatch(sc.Text())
		switch {
		case m == nil:
			return nil, fmt.Errorf("%s --list %s: unexpected line %q", interp, binary, sc.Text())
		case m[2] == "not found":
			return nil, fmt.Errorf("%s needs %s, which this machine's loader does not find", binary, m[1])
		case strings.HasPrefix(m[2], "/"):
			objects = append(objects, m[2])
		}
		// Otherwise the kernel's vDSO, which is no file.
	}

	files := map[string]ociimage.File{}
	add := func(p string) error {
		if _, ok := files[p]; ok {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			files[p] = ociimage.File{Path: p, Link: link}
			return nil
		}
		files[p] = ociimage.File{Path: p, Source: p}
		return nil
	}
	packages := map[string]map[string]bool{} // package → directories of its objects
	for _, obj := range objects {
		// A link the loader followed is in the image as a link, and its
		// target too; the package is the target's. Only the last
		// component's links are followed: the machine's own directory
		// links (/lib to usr/lib) are not the package's paths.
		for hops := 0; ; hops++ {
			if err := add(obj); err != nil {
				return nil, err
			}
			link := files[obj].Link
			if link == "" {
				break
			}
			if hops == maxLinks {
				return nil, fmt.Errorf("%s: more than %d symbolic links", obj, maxLinks)
			}
			if !path.IsAbs(link) {
				link = path.Join(path.Dir(obj), link)
			}
			obj = link
		}
		pkg, err := debianPackage(obj)
		if err != nil {
			return nil, err
		}
		if pkg == "" {
			continue
		}
		if packages[pkg] == nil {
			packages[pkg] = map[string]bool{}
		}
		packages[pkg][path.Dir(obj)] = true
	}
	for pkg, dirs := range packages {
		out, err := exec.Command("dpkg-query", "-L", pkg).Output()
		if err != nil {
			return nil, fmt.Errorf("dpkg-query -L %s: %w", pkg, err)
		}
		for _, p := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if dirs[path.Dir(p)] && strings.Contains(path.Base(p), ".so") {
				if err := add(p); err != nil {
					return nil, fmt.Errorf("%s of %s: %w", p, pkg, err)
				}
			}
		}
		name, _, _ := strings.Cut(pkg, ":")
		if copyright := "/usr/share/doc/" + name + "/copyright"; fileExists(copyright) {
			files[copyright] = ociimage.File{Path: copyright, Source: copyright, Mode: 0o644}
		}
	}
	// The links among them are kept as the package has them; a link
	// whose target is not among them gets its contents instead.
	for p, file := range files {
		if file.Link == "" {
			continue
		}
		target := file.Link
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		if _, ok := files[target]; !ok {
			files[p] = ociimage.File{Path: p, Source: p}
		}
	}
	list := make([]ociimage.File, 0, len(files))
	for _, file := range files {
		list = append(list, file)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Path < list[j].Path })
	return list, nil
}

// debianPackage is the package that installed p, or "" when none did
// (a library of the machine's own). Without dpkg this is no Debian
// machine, and the C library cannot be told apart from other files.
func debianPackage(p string) (string, error) {
	out, err := exec.Command("dpkg-query", "-S", p).Output()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("finding the Debian package of %s (the C library is taken from this machine's packages): %w", p, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if pkg, file, ok := strings.Cut(line, ": "); ok && file == p && !strings.HasPrefix(line, "diversion") {
			return pkg, nil
		}
	}
	return "", nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
