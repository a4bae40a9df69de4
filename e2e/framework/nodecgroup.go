package framework

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nodeCgroup is the cgroup of everything a node runs: its containerd (and
// so the shims it starts), its kubelet, the drivers a test adopts, and
// beneath it the kubelet's cgroup root, where runc puts the pods'
// containers. Killing what is in it is a power cut (Reboot), and nothing
// a test started outlives it.
//
// Paths are /dractl-e2e/<test pid>-<seq> in every hierarchy mounted under
// /sys/fs/cgroup (one on cgroup v2), so that what a killed test left is
// found and removed by the next (sweepNodeCgroups).
type nodeCgroup struct {
	// path is the cgroup's path within each hierarchy.
	path string
	// hierarchies are the mount points of the cgroup hierarchies.
	hierarchies []string
}

const nodeCgroupParent = "/dractl-e2e"

// Beneath a node's cgroup: the kubelet's cgroupRoot, and the leaf its
// processes run in (a cgroup with children holds no process on cgroup
// v2).
const (
	podsCgroup   = "pods"
	systemCgroup = "system"
)

func cgroupHierarchies() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		// ID parent major:minor root mountpoint options... - fstype source superoptions
		fields := strings.Fields(s.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		if t := fields[sep+1]; (t == "cgroup" || t == "cgroup2") && strings.HasPrefix(fields[4], "/sys/fs/cgroup") {
			out = append(out, fields[4])
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted under /sys/fs/cgroup")
	}
	return out, s.Err()
}

func newNodeCgroup(seq int) (*nodeCgroup, error) {
	hs, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	sweepNodeCgroups(hs)
	c := &nodeCgroup{path: fmt.Sprintf("%s/%d-%d", nodeCgroupParent, os.Getpid(), seq), hierarchies: hs}
	for _, h := range hs {
		for _, p := range []string{nodeCgroupParent, c.path, c.path + "/" + podsCgroup, c.path + "/" + systemCgroup} {
			if err := mkCgroup(h, p); err != nil {
				c.remove()
				return nil, fmt.Errorf("creating the node's cgroup (the machine refused it): %w", err)
			}
		}
	}
	return c, nil
}

// mkCgroup creates a cgroup; in a v1 cpuset hierarchy a new cgroup has no
// CPUs or memory nodes until given its parent's.
func mkCgroup(hierarchy, path string) error {
	dir := filepath.Join(hierarchy, path)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		mine := filepath.Join(dir, f)
		if cur, err := os.ReadFile(mine); err != nil || strings.TrimSpace(string(cur)) != "" {
			continue
		}
		parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(mine, parent, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", mine, err)
		}
	}
	return nil
}

// join moves a process into the node's cgroup (its system leaf) in every
// hierarchy.
func (c *nodeCgroup) join(pid int) error {
	for _, h := range c.hierarchies {
		f := filepath.Join(h, c.path, systemCgroup, "cgroup.procs")
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("moving process %d into %s (the machine refused it): %w", pid, f, err)
		}
	}
	return nil
}

// pids lists the processes in the cgroup and beneath it.
func (c *nodeCgroup) pids() []int {
	return cgroupPids(c.hierarchies, c.path)
}

func cgroupPids(hierarchies []string, path string) []int {
	seen := map[int]bool{}
	for _, h := range hierarchies {
		_ = filepath.WalkDir(filepath.Join(h, path), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// kill sends SIGKILL to every process in the cgroup until none is left:
// the node's power goes out.
func (c *nodeCgroup) kill() error {
	return killCgroup(c.hierarchies, c.path)
}

func killCgroup(hierarchies []string, path string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := cgroupPids(hierarchies, path)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of cgroup %s survive SIGKILL", pids, path)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// remove kills what is left and removes the cgroup and those the kubelet
// and runc made beneath it.
func (c *nodeCgroup) remove() error {
	err := errors.Join(c.kill(), removeCgroup(c.hierarchies, c.path))
	for _, h := range c.hierarchies {
		// Left while other nodes use it.
		_ = os.Remove(filepath.Join(h, nodeCgroupParent))
	}
	return err
}

func removeCgroup(hierarchies []string, path string) error {
	var errs []error
	for _, h := range hierarchies {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, path), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		// Children before parents.
		for _, d := range slices.Backward(dirs) {
			if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// sweepNodeCgroups kills and removes the node cgroups of test processes
// that are gone.
func sweepNodeCgroups(hierarchies []string) {
	for _, h := range hierarchies {
		entries, _ := os.ReadDir(filepath.Join(h, nodeCgroupParent))
		for _, e := range entries {
			if pid, ok := ownerPID(e.Name(), ""); e.IsDir() && ok && !alive(pid) {
				path := nodeCgroupParent + "/" + e.Name()
				_ = killCgroup(hierarchies, path)
				_ = removeCgroup(hierarchies, path)
			}
		}
	}
}
