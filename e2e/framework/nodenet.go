package framework

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// nodeNet is a node's address. The kubelet refuses a loopback node IP,
// and kube-apiserver reaches a kubelet (a pod's log, exec, metrics) at
// its Node's InternalIP, so each node gets an address of its own: the
// host end of a veth pair carries it (a /32, so no route leads through
// the pair), and the other end lives in a network namespace made for the
// node, holding nothing but that end. The node's processes stay in the
// host's network namespace (pods use the host network, no CNI), where the
// address is local, so traffic to it never leaves the machine.
//
// Addresses are taken from the first of the documentation blocks
// (TEST-NET-1 to 3, RFC 5737) that no route of the machine covers, one
// not on any interface of the machine: these machines' own network may
// be one of them (192.0.2.0/24 here), and an address of a network the
// machine reaches would hide a neighbour. Names carry the test process's
// ID, so that what a killed test left is found and removed by the next
// (sweepNodeNets).
type nodeNet struct {
	netns, link string
	ip          net.IP
}

// nodeNetBlocks are RFC 5737's blocks, never routed on the Internet.
var nodeNetBlocks = []string{"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"}

const (
	nodeNetnsName = "dractl-e2e-"
	// nodeNetLock serializes choosing an address among the test
	// processes of this machine.
	nodeNetLock = "/tmp/dractl-e2e-node-net.lock"
)

func ipCmd(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newNodeNet makes node seq's veth pair and network namespace.
func newNodeNet(seq int) (*nodeNet, error) {
	lock, err := os.OpenFile(nodeNetLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, fmt.Errorf("flock %s: %w", nodeNetLock, err)
	}
	sweepNodeNets()
	ip, err := freeNodeAddress()
	if err != nil {
		return nil, err
	}
	n := &nodeNet{
		netns: fmt.Sprintf("%s%d-%d", nodeNetnsName, os.Getpid(), seq),
		link:  fmt.Sprintf("dre%dn%d", os.Getpid(), seq),
		ip:    ip,
	}
	steps := [][]string{
		{"netns", "add", n.netns},
		{"link", "add", n.link, "type", "veth", "peer", "name", "eth0", "netns", n.netns},
		{"addr", "add", ip.String() + "/32", "dev", n.link},
		{"link", "set", n.link, "up"},
		{"-n", n.netns, "link", "set", "eth0", "up"},
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			n.remove()
			return nil, fmt.Errorf("giving the node an address (the machine refused a network namespace or veth): %w", err)
		}
	}
	return n, nil
}

// freeNodeAddress is an address of the first block that no route of the
// machine's main table covers (the default route aside), on no interface
// of the machine (the nodes of other test processes have theirs there).
func freeNodeAddress() (net.IP, error) {
	routes, err := exec.Command("ip", "-o", "-4", "route", "show", "table", "main").Output()
	if err != nil {
		return nil, fmt.Errorf("ip -o -4 route show table main: %w", err)
	}
	addrs, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("ip -o -4 addr show: %w", err)
	}
	var used []*net.IPNet
	for _, line := range strings.Split(string(routes), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "default" {
			continue
		}
		dst := f[0]
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if _, n, err := net.ParseCIDR(dst); err == nil {
			used = append(used, n)
		}
	}
	for _, b := range nodeNetBlocks {
		_, block, _ := net.ParseCIDR(b)
		if slices.ContainsFunc(used, func(n *net.IPNet) bool { return n.Contains(block.IP) || block.Contains(n.IP) }) {
			continue
		}
		for i := 2; i < 255; i++ {
			ip := net.IPv4(block.IP[0], block.IP[1], block.IP[2], byte(i)).To4()
			if !strings.Contains(string(addrs), " "+ip.String()+"/") {
				return ip, nil
			}
		}
	}
	return nil, fmt.Errorf("no address for a node: the machine's routes cover or its interfaces use all of %v", nodeNetBlocks)
}

// remove deletes the namespace, and with it both ends of the pair.
func (n *nodeNet) remove() error {
	return ipCmd("netns", "del", n.netns)
}

// sweepNodeNets removes the namespaces of test processes that are gone.
func sweepNodeNets() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if pid, ok := ownerPID(name, nodeNetnsName); ok && !alive(pid) {
			_ = ipCmd("netns", "del", name)
		}
	}
}

// ownerPID is the test process ID in a name "<prefix><pid>-<seq>".
func ownerPID(name, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	p, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(p)
	return pid, ok && err == nil
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
