package live

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Decoding is most of what listing ResourceSlices costs the client: a
// MIG node's slices hold some 150 devices, each with maps of attributes,
// capacities and counters. client-go decodes a page in the goroutine that
// fetches the next one, so a list of thousands of slices runs on one core
// while the API server waits. slicesParallel reads each page's list
// metadata first (the continue token is all the next request needs), asks
// for the next page at once, and decodes the slices on every core.

// errNotProtobuf: the server answered in another encoding; the caller
// lists the ordinary way.
var errNotProtobuf = errors.New("list not encoded as protobuf")

// slicesParallel lists ResourceSlices page by page, decoding the slices of
// each page in parallel with the next request. The result is in the
// server's order.
func (c *Client) slicesParallel(ctx context.Context, fieldSelector string) ([]*resourcev1.ResourceSlice, error) {
	// A fake clientset has no REST client.
	rc, ok := c.cs.ResourceV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return nil, errNotProtobuf
	}
	// Items decode in workers, into their page's slots.
	var (
		pages [][]*resourcev1.ResourceSlice
		wg    sync.WaitGroup
		mu    sync.Mutex
		bad   error
		work  = make(chan func())
	)
	workers := max(runtime.GOMAXPROCS(0), 1)
	for range workers {
		go func() {
			for f := range work {
				f()
			}
		}()
	}
	defer close(work)
	opts := metav1.ListOptions{FieldSelector: fieldSelector, Limit: c.pageSize()}
	decoder := protobuf.NewSerializer(nil, nil)
	for {
		var contentType string
		res := rc.Get().Resource("resourceslices").VersionedParams(&opts, scheme.ParameterCodec).
			Do(ctx).ContentType(&contentType)
		raw, err := res.Raw()
		if err != nil {
			wg.Wait()
			// Error, unlike Raw, reads the Status the server sent
			// (forbidden, expired), as a typed client's List does.
			return nil, res.Error()
		}
		if !strings.HasPrefix(contentType, k8sruntime.ContentTypeProtobuf) {
			wg.Wait()
			return nil, errNotProtobuf
		}
		var unk k8sruntime.Unknown
		if _, _, err := decoder.Decode(raw, nil, &unk); err != nil {
			wg.Wait()
			return nil, err
		}
		meta, items, err := splitList(unk.Raw)
		if err != nil {
			wg.Wait()
			return nil, fmt.Errorf("decoding a page of ResourceSlices: %w", err)
		}
		page := make([]*resourcev1.ResourceSlice, len(items))
		pages = append(pages, page)
		// Enough chunks for every worker, few enough to stay cheap.
		chunk := max(len(items)/(2*workers), 1)
		for lo := 0; lo < len(items); lo += chunk {
			hi := min(lo+chunk, len(items))
			wg.Add(1)
			work <- func() {
				defer wg.Done()
				for i := lo; i < hi; i++ {
					s := new(resourcev1.ResourceSlice)
					if err := s.Unmarshal(items[i]); err != nil {
						mu.Lock()
						bad = errors.Join(bad, fmt.Errorf("decoding a ResourceSlice: %w", err))
						mu.Unlock()
						return
					}
					page[i] = s
				}
			}
		}
		if meta.Continue == "" {
			break
		}
		opts.Continue = meta.Continue
		if ctx.Err() != nil {
			break
		}
	}
	wg.Wait()
	if bad != nil {
		return nil, bad
	}
	return slices.Concat(pages...), ctx.Err()
}

// splitList reads a protobuf-encoded list (a ListMeta in field 1, items
// in field 2, as every Kubernetes list type is numbered) without decoding
// its items: it returns the list metadata and each item's bytes.
func splitList(b []byte) (metav1.ListMeta, [][]byte, error) {
	var meta metav1.ListMeta
	var items [][]byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return meta, nil, protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType || (num != 1 && num != 2) {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return meta, nil, protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return meta, nil, protowire.ParseError(n)
		}
		b = b[n:]
		if num == 1 {
			if err := meta.Unmarshal(v); err != nil {
				return meta, nil, err
			}
			continue
		}
		items = append(items, v)
	}
	return meta, items, nil
}

// expired reports a continue token the server no longer honours; the
// list is then read again the ordinary way, as client-go's pager does.
func expired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}
