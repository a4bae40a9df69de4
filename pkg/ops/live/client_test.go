package live_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/dractl/dractl/pkg/ops/live"
)

func TestForbiddenNamesVerbAndResource(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("list", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}, "",
			errors.New(`User "system:serviceaccount:default:viewer" cannot list resource "resourceslices"`))
	})
	_, err := live.NewClientFor(cs, "https://example").Slices(context.Background(), "")
	if err == nil || !live.Forbidden(err) || live.Unreachable(err) {
		t.Fatalf("got %v, want a forbidden error", err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "cannot list resourceslices.resource.k8s.io: ") || !strings.Contains(msg, "forbidden") {
		t.Errorf("message %q does not name the verb, the resource and the refusal", msg)
	}
}

func TestUnreachableServer(t *testing.T) {
	// A port that was just free and is closed again: connections are refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := live.NewClient(&rest.Config{Host: "https://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(context.Background(), live.KindSlices|live.KindClaims)
	if !live.Unreachable(err) || live.Forbidden(err) {
		t.Fatalf("got %v, want an unreachable error", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "cannot list resourceslices.resource.k8s.io: the API server at https://"+addr+" cannot be reached") {
		t.Errorf("message %q does not say which server cannot be reached", msg)
	}
}
