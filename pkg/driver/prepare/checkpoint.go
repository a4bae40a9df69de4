package prepare

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// ClaimState is where a claim stands in the two-phase protocol. The state
// is written before the step it announces, so that after a crash the kit
// knows which steps may have happened and undoes or finishes them.
type ClaimState string

const (
	// PrepareStarted: partitions and the CDI spec may exist in part.
	PrepareStarted ClaimState = "PrepareStarted"
	// PrepareCompleted: every partition and the CDI spec exist; the
	// answer to the kubelet is in the record.
	PrepareCompleted ClaimState = "PrepareCompleted"
	// UnprepareStarted: the CDI spec and partitions may be gone in part.
	UnprepareStarted ClaimState = "UnprepareStarted"
)

// ClaimRecord is the checkpoint of one claim.
type ClaimRecord struct {
	UID       types.UID  `json:"uid"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	State     ClaimState `json:"state"`
	// Devices are the claim's devices of this driver in allocation order.
	Devices []PreparedDevice `json:"devices"`
}

// PreparedDevice is one allocated device and what preparing it produced.
type PreparedDevice struct {
	AllocatedDevice
	// Partition is set once the partition exists.
	Partition *Partition `json:"partition,omitempty"`
	// CDIDeviceIDs are handed to the kubelet, set at PrepareCompleted.
	CDIDeviceIDs []string `json:"cdiDeviceIDs,omitempty"`
}

// checkpointFile is the on-disk envelope: the record and the SHA-256 of
// its JSON, so that a torn or bit-flipped file is detected rather than
// trusted.
type checkpointFile struct {
	Version  int             `json:"version"`
	Checksum string          `json:"checksum"`
	Record   json.RawMessage `json:"record"`
}

const checkpointVersion = 1

// CorruptCheckpointError is a checkpoint file that cannot be trusted.
type CorruptCheckpointError struct {
	Path   string
	Reason string
}

func (e *CorruptCheckpointError) Error() string {
	return fmt.Sprintf("checkpoint %s is corrupt: %s", e.Path, e.Reason)
}

// checkpoints stores one file per claim under dir, so that claims being
// prepared in parallel never rewrite each other's state.
type checkpoints struct {
	dir string
}

func newCheckpoints(dir string) (*checkpoints, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint directory: %w", err)
	}
	return &checkpoints{dir: dir}, nil
}

const checkpointExt = ".json"

func (c *checkpoints) path(uid types.UID) string {
	return filepath.Join(c.dir, string(uid)+checkpointExt)
}

// Write replaces the claim's checkpoint atomically: a reader (or a restart
// after a crash at any instant) sees the old record or the new one.
func (c *checkpoints) Write(r *ClaimRecord) error {
	rec, err := json.Marshal(r)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(rec)
	data, err := json.Marshal(checkpointFile{Version: checkpointVersion, Checksum: hex.EncodeToString(sum[:]), Record: rec})
	if err != nil {
		return err
	}
	return WriteFileAtomic(c.path(r.UID), data)
}

// Read returns the claim's record, nil if there is none, or a
// *CorruptCheckpointError.
func (c *checkpoints) Read(uid types.UID) (*ClaimRecord, error) {
	return c.readPath(c.path(uid))
}

func (c *checkpoints) readPath(path string) (*ClaimRecord, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	corrupt := func(format string, args ...any) error {
		return &CorruptCheckpointError{Path: path, Reason: fmt.Sprintf(format, args...)}
	}
	var f checkpointFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, corrupt("not a checkpoint (%d bytes): %v", len(data), err)
	}
	if f.Version != checkpointVersion {
		return nil, corrupt("version %d, expected %d", f.Version, checkpointVersion)
	}
	sum := sha256.Sum256(f.Record)
	if got := hex.EncodeToString(sum[:]); got != f.Checksum {
		return nil, corrupt("checksum %s, expected %s", got, f.Checksum)
	}
	var r ClaimRecord
	if err := json.Unmarshal(f.Record, &r); err != nil {
		return nil, corrupt("record: %v", err)
	}
	if want := strings.TrimSuffix(filepath.Base(path), checkpointExt); string(r.UID) != want {
		return nil, corrupt("record of claim %s in the file of claim %s", r.UID, want)
	}
	return &r, nil
}

// Delete removes the claim's checkpoint; a missing one is not an error.
func (c *checkpoints) Delete(uid types.UID) error {
	if err := os.Remove(c.path(uid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return syncDir(c.dir)
}

// List reads every checkpoint. Corrupt ones are returned as errors next
// to the good records, so that one bad file does not hide the others.
func (c *checkpoints) List() ([]*ClaimRecord, []error, error) {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, nil, err
	}
	var out []*ClaimRecord
	var bad []error
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != checkpointExt {
			continue
		}
		r, err := c.readPath(filepath.Join(c.dir, e.Name()))
		switch {
		case err != nil:
			bad = append(bad, err)
		case r != nil:
			out = append(out, r)
		}
	}
	return out, bad, nil
}

// Quarantine moves a corrupt checkpoint aside, keeping it for inspection
// but out of the way of the claim's next prepare.
func (c *checkpoints) Quarantine(path string) error {
	return os.Rename(path, path+".corrupt")
}

// WriteFileAtomic writes data to a temporary file in the same directory,
// syncs it, renames it over name and syncs the directory: after a crash at
// any instant the file is whole (old or new), and once it returns the new
// content is durable. Profiles use it for their own records.
func WriteFileAtomic(name string, data []byte) error {
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
