package api_test

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dractl/dractl/pkg/core/api"
)

func TestUnreadFields(t *testing.T) {
	entry := func(raw string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: "m", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(raw)}
	}
	for _, tc := range []struct {
		name    string
		managed []metav1.ManagedFieldsEntry
		want    []string
	}{
		{"none", nil, nil},
		{"every field of v1", []metav1.ManagedFieldsEntry{entry(`{"f:metadata":{"f:labels":{"f:x":{}}},"f:spec":{".":{},"f:driver":{},"f:pool":{".":{},"f:name":{},"f:generation":{},"f:resourceSliceCount":{}},"f:nodeName":{},"f:devices":{},"f:sharedCounters":{},"f:perDeviceNodeSelection":{},"f:allNodes":{},"f:nodeSelector":{"f:nodeSelectorTerms":{}}}}`)}, nil},
		{"mixins", []metav1.ManagedFieldsEntry{entry(`{"f:spec":{"f:driver":{},"f:devices":{},"f:mixins":{".":{},"f:device":{},"f:counterSet":{}}}}`)}, []string{"spec.mixins"}},
		{"a nested field", []metav1.ManagedFieldsEntry{entry(`{"f:spec":{"f:pool":{"f:name":{},"f:shards":{}}}}`)}, []string{"spec.pool.shards"}},
		{"two managers, one path once", []metav1.ManagedFieldsEntry{
			entry(`{"f:spec":{"f:mixins":{}}}`), entry(`{"f:spec":{"f:mixins":{},"f:devices":{}}}`), entry(`{"f:spec":{"f:zeta":{}}}`),
		}, []string{"spec.mixins", "spec.zeta"}},
		{"unknown metadata and status are not the slice's devices", []metav1.ManagedFieldsEntry{entry(`{"f:metadata":{"f:newThing":{}},"f:status":{"f:x":{}}}`)}, nil},
		{"malformed fieldsV1 is skipped", []metav1.ManagedFieldsEntry{entry(`{"f:spec":`), {Manager: "no-fields"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := api.UnreadFields(tc.managed); !slices.Equal(got, tc.want) {
				t.Errorf("UnreadFields = %q, want %q", got, tc.want)
			}
		})
	}
}
