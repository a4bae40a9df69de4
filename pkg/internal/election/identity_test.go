package election

import (
	"os"
	"strings"
	"testing"
)

func TestIdentityIsTheHostAndUnique(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	a, err := Identity()
	if err != nil {
		t.Fatal(err)
	}
	b, err := Identity()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a, host+"_") || !strings.HasPrefix(b, host+"_") {
		t.Errorf("identities %q and %q do not name the host %q", a, b, host)
	}
	if a == b {
		t.Errorf("two replicas on one host got the same identity %q", a)
	}
}
