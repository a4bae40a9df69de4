package e2e

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/e2e/framework"
)

func TestControlPlaneServesDRA(t *testing.T) {
	cp := framework.StartControlPlane(t, framework.Options{Components: []framework.Component{framework.ResourceClaimController{}}})
	if _, err := cp.Client.ResourceV1().ResourceSlices().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
}
