package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The configuration of a Node's containerd and kubelet: every setting
// that differs from their defaults, and why, is here and nowhere else.
//
// A node's files are under its directory (Node.Dir), short because unix
// socket paths are limited to 107 bytes:
//
//	etc/          configurations, credentials, CNI configuration
//	containerd/   containerd's root (images, snapshots, metadata): /var/lib/containerd
//	kubelet/      the kubelet's --root-dir: /var/lib/kubelet
//	logs/pods/    the kubelet's podLogsDir: /var/log/pods
//	manifests/    the kubelet's staticPodPath
//	run/          the node's /run, a tmpfs on a real node, emptied by Reboot:
//	  containerd/     containerd's state directory
//	  containerd.sock the CRI and containerd API socket
//	  runc/           runc's state (--root)
//	  cdi/            the CDI spec directory drivers write (/var/run/cdi)
//	log/          the processes' own logs (kubelet-1.log, containerd-1.log, ...)
type nodeLayout struct{ dir string }

func (l nodeLayout) etc() string                  { return filepath.Join(l.dir, "etc") }
func (l nodeLayout) containerdRoot() string       { return filepath.Join(l.dir, "containerd") }
func (l nodeLayout) kubeletRoot() string          { return filepath.Join(l.dir, "kubelet") }
func (l nodeLayout) podLogs() string              { return filepath.Join(l.dir, "logs", "pods") }
func (l nodeLayout) manifests() string            { return filepath.Join(l.dir, "manifests") }
func (l nodeLayout) run() string                  { return filepath.Join(l.dir, "run") }
func (l nodeLayout) containerdState() string      { return filepath.Join(l.run(), "containerd") }
func (l nodeLayout) containerdSocket() string     { return filepath.Join(l.run(), "containerd.sock") }
func (l nodeLayout) runcRoot() string             { return filepath.Join(l.run(), "runc") }
func (l nodeLayout) cdi() string                  { return filepath.Join(l.run(), "cdi") }
func (l nodeLayout) processLogs() string          { return filepath.Join(l.dir, "log") }
func (l nodeLayout) cniConf() string              { return filepath.Join(l.etc(), "cni", "net.d") }
func (l nodeLayout) cniBin() string               { return filepath.Join(l.dir, "cni", "bin") }
func (l nodeLayout) containerdConfigFile() string { return filepath.Join(l.etc(), "containerd.toml") }
func (l nodeLayout) kubeletConfigFile() string    { return filepath.Join(l.etc(), "kubelet.yaml") }
func (l nodeLayout) persistentDirs() []string {
	return []string{l.etc(), l.containerdRoot(), l.kubeletRoot(), l.podLogs(), l.manifests(), l.processLogs(), l.cniConf(), l.cniBin()}
}
func (l nodeLayout) runDirs() []string {
	return []string{l.run(), l.containerdState(), l.runcRoot(), l.cdi()}
}

// containerdConfig is containerd's configuration (version 3).
func (l nodeLayout) containerdConfig(t *nodeTools) string {
	q := strconv.Quote
	return strings.Join([]string{
		`version = 3`,
		`root = ` + q(l.containerdRoot()),
		`state = ` + q(l.containerdState()),
		`[grpc]`,
		`  address = ` + q(l.containerdSocket()),
		// The shims are found beside containerd.
		`[plugins."io.containerd.cri.v1.runtime"]`,
		// The node's CDI spec directory, where drivers write (there is
		// no enable_cdi any more: CDI is always on).
		`  cdi_spec_dirs = [` + q(l.cdi()) + `]`,
		// This machine refuses a negative oom_score_adj, which the
		// kubelet asks for the sandbox (-998): without this, runc fails
		// every sandbox with "can't get final child's PID from pipe:
		// EOF". containerd keeps each container's score at or above its
		// own instead.
		`  restrict_oom_score_adj = true`,
		// Pods use the host network: containerd reports its network
		// ready (and the kubelet its Node Ready) only once a CNI
		// configuration loads, so one is given, naming a plugin that is
		// not installed: a pod that is not on the host network fails
		// at sandbox creation with containerd's error instead of being
		// wired to anything.
		`  [plugins."io.containerd.cri.v1.runtime".cni]`,
		`    bin_dirs = [` + q(l.cniBin()) + `]`,
		`    conf_dir = ` + q(l.cniConf()),
		`  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]`,
		// Debian's runc, with its state in the node's /run.
		`    BinaryName = ` + q(t.runc),
		`    Root = ` + q(l.runcRoot()),
		`[plugins."io.containerd.cri.v1.images"]`,
		// Imported, never pulled (PauseImage).
		`  [plugins."io.containerd.cri.v1.images".pinned_images]`,
		`    sandbox = ` + q(PauseImage),
		// NRI's socket is machine-wide (/var/run/nri/nri.sock) and
		// nothing here uses it.
		`[plugins."io.containerd.nri.v1.nri"]`,
		`  disable = true`,
		// Its default directory is machine-wide (/opt/containerd).
		`[plugins."io.containerd.internal.v1.opt"]`,
		`  path = ` + q(filepath.Join(l.containerdRoot(), "opt")),
		``,
	}, "\n")
}

// cniConfig is the CNI configuration that makes containerd's network
// ready; see containerdConfig.
const cniConfig = `{"cniVersion": "1.0.0", "name": "host-network-only", "plugins": [{"type": "no-pod-network-on-this-node"}]}`

// kubeletConfig is the kubelet's configuration file.
func (l nodeLayout) kubeletConfig(n *Node, cert, key, clientCA string) ([]byte, error) {
	cfg := kubeletconfigv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: kubeletconfigv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		// The kubelet serves (logs, exec, metrics) on the node's own
		// address only, the default port: every node has an address of
		// its own. No read-only port, no healthz port: nothing uses
		// them, and they would be machine-wide.
		Address:      n.net.ip.String(),
		Port:         10250,
		ReadOnlyPort: 0,
		HealthzPort:  ptr.To[int32](0),
		// kube-apiserver is authenticated by its client certificate and
		// authorized by asking kube-apiserver (kubeletPKI).
		TLSCertFile:       cert,
		TLSPrivateKeyFile: key,
		Authentication: kubeletconfigv1beta1.KubeletAuthentication{
			X509:      kubeletconfigv1beta1.KubeletX509Authentication{ClientCAFile: clientCA},
			Webhook:   kubeletconfigv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			Anonymous: kubeletconfigv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
		},
		Authorization:            kubeletconfigv1beta1.KubeletAuthorization{Mode: kubeletconfigv1beta1.KubeletAuthorizationModeWebhook},
		ContainerRuntimeEndpoint: "unix://" + l.containerdSocket(),
		PodLogsDir:               l.podLogs(),
		StaticPodPath:            l.manifests(),
		FeatureGates:             n.cp.gates,
		// cgroupfs, not systemd: no systemd runs here. The pods' cgroups
		// go beneath the node's (nodeCgroup), so that two nodes on one
		// machine do not share /kubepods.
		CgroupDriver: "cgroupfs",
		CgroupRoot:   n.cgroup.path + "/" + podsCgroup,
		// These machines have cgroup v1, which the kubelet refuses by
		// default since 1.35; and swap may be on.
		FailCgroupV1: ptr.To(false),
		FailSwapOn:   ptr.To(false),
		// The node's resources are the machine's, shared with other
		// nodes and builds: nothing is reserved or enforced, nothing is
		// evicted ("0%" turns a threshold off) and no image is
		// collected (100 % turns image GC off; the images are imported
		// once and cannot be pulled again).
		EnforceNodeAllocatable:        []string{},
		EvictionHard:                  map[string]string{"memory.available": "0%", "nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%", "imagefs.inodesFree": "0%"},
		MergeDefaultEvictionSettings:  ptr.To(false),
		ImageGCHighThresholdPercent:   ptr.To[int32](100),
		ImageGCLowThresholdPercent:    ptr.To[int32](99),
		LocalStorageCapacityIsolation: ptr.To(false),
		// A pod whose claims failed to prepare is synced again at the
		// next periodic sync, not after the pod workers' 10 s back-off
		// of a failed sync (kuberuntime's SyncPod records the Event and
		// returns without an error): a minute by default, 5 s here, so
		// that a test of a failure waits seconds for the kubelet's
		// retry.
		SyncFrequency: metav1.Duration{Duration: 5 * time.Second},
	}
	return yaml.Marshal(&cfg)
}

// kubeletArgs are the kubelet's flags: what has no field in its
// configuration file.
func (l nodeLayout) kubeletArgs(n *Node) []string {
	return []string{
		"--config=" + l.kubeletConfigFile(),
		"--kubeconfig=" + n.kubeconfig,
		"--root-dir=" + l.kubeletRoot(),
		"--hostname-override=" + n.NodeName,
		"--node-ip=" + n.net.ip.String(),
		"--v=2",
	}
}

func (l nodeLayout) writeConfigs(n *Node, t *nodeTools, cert, key string) error {
	kc, err := l.kubeletConfig(n, cert, key, n.cp.kubeletPKI.caFile)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		l.containerdConfigFile():                               []byte(l.containerdConfig(t)),
		l.kubeletConfigFile():                                  kc,
		filepath.Join(l.cniConf(), "10-host-network.conflist"): []byte(cniConfig),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}
