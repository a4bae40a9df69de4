package live

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"testing/iotest"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

func TestSplitListReadsMetadataAndItemsApart(t *testing.T) {
	list := &resourcev1.ResourceSliceList{
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next-page", RemainingItemCount: ptr.To[int64](7)},
	}
	for _, name := range []string{"a", "b", "c"} {
		list.Items = append(list.Items, resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 3},
				NodeName: ptr.To("node-1"), Devices: []resourcev1.Device{{Name: "gpu-" + name}}},
		})
	}
	raw, err := list.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	meta, items, err := splitList(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(list.ListMeta, meta) {
		t.Errorf("list metadata %+v, want %+v", meta, list.ListMeta)
	}
	if len(items) != len(list.Items) {
		t.Fatalf("%d items, want %d", len(items), len(list.Items))
	}
	for i, b := range items {
		var s resourcev1.ResourceSlice
		if err := s.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(list.Items[i], s) {
			t.Errorf("item %d: %+v, want %+v", i, s, list.Items[i])
		}
	}
	if _, _, err := splitList(raw[:len(raw)-3]); err == nil {
		t.Error("a truncated list was read without an error")
	}
}

// unwrap reads the list out of the envelope the API server's protobuf
// serializer writes, and refuses what is not one.
func TestUnwrapReadsTheProtobufEnvelope(t *testing.T) {
	list := &resourcev1.ResourceSliceList{ListMeta: metav1.ListMeta{Continue: "c"},
		Items: []resourcev1.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}}
	list.APIVersion, list.Kind = "resource.k8s.io/v1", "ResourceSliceList"
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(nil, nil).Encode(list, &buf); err != nil {
		t.Fatal(err)
	}
	raw, err := unwrap(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	meta, items, err := splitList(raw)
	if err != nil || meta.Continue != "c" || len(items) != 1 {
		t.Errorf("got %+v, %d items, %v; want the list", meta, len(items), err)
	}
	if _, err := unwrap([]byte(`{"kind":"ResourceSliceList"}`)); !errors.Is(err, errNotProtobuf) {
		t.Errorf("JSON: got %v, want errNotProtobuf", err)
	}
	if _, err := unwrap(buf.Bytes()[:buf.Len()-10]); err == nil {
		t.Error("a truncated envelope was read without an error")
	}
}

// encodedList is a list of n slices as the API server's protobuf
// serializer writes it.
func encodedList(t *testing.T, cont string, names ...string) []byte {
	t.Helper()
	list := &resourcev1.ResourceSliceList{ListMeta: metav1.ListMeta{ResourceVersion: "7", Continue: cont}}
	list.APIVersion, list.Kind = "resource.k8s.io/v1", "ResourceSliceList"
	for _, name := range names {
		list.Items = append(list.Items, resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: name, ResourceSliceCount: 1},
				NodeName: ptr.To(name), Devices: []resourcev1.Device{{Name: "gpu-0"}}}})
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(nil, nil).Encode(list, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The continue token is read from the first bytes of a page, and only
// once they are all there.
func TestListMetaPrefixReadsTheTokenFromTheFirstBytes(t *testing.T) {
	raw := encodedList(t, "page-2", "a", "b", "c")
	first := -1
	for i := 0; i <= len(raw); i++ {
		meta, err := listMetaPrefix(raw[:i])
		if err != nil {
			t.Fatalf("%d bytes: %v", i, err)
		}
		if meta == nil {
			if first >= 0 {
				t.Fatalf("the token was read from %d bytes but not from %d", first, i)
			}
			continue
		}
		if first < 0 {
			first = i
		}
		if meta.Continue != "page-2" || meta.ResourceVersion != "7" {
			t.Fatalf("%d bytes: got %+v", i, meta)
		}
	}
	if first < 0 || first > len(raw)/2 {
		t.Errorf("the token was read only from %d of %d bytes", first, len(raw))
	}
	if _, err := listMetaPrefix([]byte(`{"kind":"ResourceSliceList"}`)); !errors.Is(err, errNotProtobuf) {
		t.Errorf("JSON: got %v, want errNotProtobuf", err)
	}
}

// readListMeta returns the token while the rest of the page is still on
// its way, and reads it from the whole page when the list is laid out
// otherwise.
func TestReadListMetaDoesNotWaitForTheItems(t *testing.T) {
	raw := encodedList(t, "page-2", "a", "b", "c")
	r, w := io.Pipe()
	go func() {
		// Everything but the last item: the reader must not need it.
		_, _ = w.Write(raw[:len(raw)-20])
	}()
	var buf bytes.Buffer
	cont, err := readListMeta(iotest.OneByteReader(r), &buf)
	if err != nil || cont != "page-2" {
		t.Fatalf("got %q, %v; want page-2", cont, err)
	}
	go func() { _, _ = w.Write(raw[len(raw)-20:]); w.Close() }()
	if err := readPage(r, &buf); err != nil {
		t.Fatal(err)
	}
	if _, items, err := splitList(buf.Bytes()); err != nil || len(items) != 3 {
		t.Fatalf("got %d items, %v; want the 3 of the page", len(items), err)
	}

	// An envelope whose object does not start with the list metadata.
	list := &resourcev1.ResourceSliceList{ListMeta: metav1.ListMeta{Continue: "late"}}
	listRaw, err := list.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	item := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), nil)
	reordered := append(item, listRaw...)
	env := append([]byte("k8s\x00"), protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), reordered)...)
	buf.Reset()
	if cont, err := readListMeta(bytes.NewReader(env), &buf); err != nil || cont != "late" {
		t.Errorf("reordered list: got %q, %v; want late", cont, err)
	}
}

// The next page is asked for while a page is still being sent: the server
// below finishes the first page only once the second has been asked for.
func TestSlicesAsksForTheNextPageWhileReadingOne(t *testing.T) {
	first := encodedList(t, "page-2", "a", "b")
	second := encodedList(t, "", "c")
	asked := make(chan struct{})
	var overlapped bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
		if r.URL.Query().Get("continue") == "page-2" {
			close(asked)
			_, _ = w.Write(second)
			return
		}
		// The envelope and the list metadata, then the items once the
		// next page has been asked for (or after a while, so that a
		// client that waits for the whole page still ends).
		half := len(first) / 2
		_, _ = w.Write(first[:half])
		w.(http.Flusher).Flush()
		select {
		case <-asked:
			overlapped = true
		case <-time.After(10 * time.Second):
		}
		_, _ = w.Write(first[half:])
	}))
	defer srv.Close()
	c, err := NewClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.SlicesWith(context.Background(), "", PoolFields)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("got %v, want a, b, c in the server's order", names)
	}
	if !overlapped {
		t.Error("the second page was asked for only once the first had been read")
	}
}
