package live

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
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
func (c *Client) slicesParallel(ctx context.Context, fieldSelector string, fields SliceFields) ([]*resourcev1.ResourceSlice, error) {
	// A fake clientset has no REST client.
	rc, ok := c.cs.ResourceV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return nil, errNotProtobuf
	}
	// Items decode in workers, into their page's slots. The queue is long
	// enough that handing out a page's work never holds up the request
	// for the next page.
	var (
		pages [][]*resourcev1.ResourceSlice
		wg    sync.WaitGroup
		mu    sync.Mutex
		bad   error
		work  = make(chan func(*poolDecoder), 1024)
		// A page's bytes are read into a buffer that goes back to bufs
		// once its slices are decoded: the next pages reuse it rather than
		// growing a new one. (A sync.Pool would lose them to every
		// garbage collection, which a list of thousands of slices causes
		// many of.)
		bufs = make(chan *bytes.Buffer, 4)
	)
	fail := func(err error) {
		mu.Lock()
		bad = errors.Join(bad, fmt.Errorf("decoding a ResourceSlice: %w", err))
		mu.Unlock()
	}
	workers := max(runtime.GOMAXPROCS(0), 1)
	for range workers {
		go func() {
			// Each worker shares what the slices it decodes have in
			// common (see poolDecoder) across pages.
			var dec *poolDecoder
			if fields == PoolFields {
				dec = newPoolDecoder()
			}
			for f := range work {
				f(dec)
			}
		}()
	}
	defer close(work)
	opts := metav1.ListOptions{FieldSelector: fieldSelector, Limit: c.pageSize()}
	for {
		var buf *bytes.Buffer
		select {
		case buf = <-bufs:
			buf.Reset()
		default:
			buf = new(bytes.Buffer)
		}
		if err := readPage(ctx, rc, &opts, buf); err != nil {
			wg.Wait()
			return nil, err
		}
		meta, items, err := splitList(buf.Bytes())
		if err != nil {
			wg.Wait()
			return nil, fmt.Errorf("decoding a page of ResourceSlices: %w", err)
		}
		page := make([]*resourcev1.ResourceSlice, len(items))
		pages = append(pages, page)
		// Enough chunks for every worker, few enough to stay cheap.
		chunk := max(len(items)/(2*workers), 1)
		var pageWG sync.WaitGroup
		for lo := 0; lo < len(items); lo += chunk {
			hi := min(lo+chunk, len(items))
			wg.Add(1)
			pageWG.Add(1)
			work <- func(dec *poolDecoder) {
				defer wg.Done()
				defer pageWG.Done()
				for i := lo; i < hi; i++ {
					var s *resourcev1.ResourceSlice
					var err error
					if dec != nil {
						s, err = dec.decode(items[i])
					} else {
						s = new(resourcev1.ResourceSlice)
						err = s.Unmarshal(items[i])
					}
					if err != nil {
						fail(err)
						return
					}
					page[i] = s
				}
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pageWG.Wait()
			select {
			case bufs <- buf:
			default:
			}
		}()
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

// readPage requests one page of ResourceSlices as protobuf and reads the
// list it holds into buf. A server that does not answer in protobuf
// (refusing it, or another encoding) is errNotProtobuf.
func readPage(ctx context.Context, rc *rest.RESTClient, opts *metav1.ListOptions, buf *bytes.Buffer) error {
	body, err := rc.Get().Resource("resourceslices").VersionedParams(opts, scheme.ParameterCodec).
		SetHeader("Accept", k8sruntime.ContentTypeProtobuf).Stream(ctx)
	if apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err) {
		return errNotProtobuf
	}
	if err != nil {
		// Stream returns the Status the server sent (forbidden, expired)
		// as a typed client's List does.
		return err
	}
	defer body.Close()
	if _, err := buf.ReadFrom(body); err != nil {
		return err
	}
	raw, err := unwrap(buf.Bytes())
	if err != nil {
		return err
	}
	// The list is moved to the front of buf, which the caller slices.
	n := copy(buf.Bytes(), raw)
	buf.Truncate(n)
	return nil
}

// unwrap returns the object inside a Kubernetes protobuf envelope (a
// four-byte magic number, then a runtime.Unknown whose field 2 holds the
// encoded object) without copying it, as the protobuf serializer's
// decoding into an Unknown would.
func unwrap(b []byte) ([]byte, error) {
	magic := []byte{'k', '8', 's', 0}
	if !bytes.HasPrefix(b, magic) {
		return nil, errNotProtobuf
	}
	b = b[len(magic):]
	var raw []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		if num == 2 && typ == protowire.BytesType {
			if raw, n = protowire.ConsumeBytes(b); n < 0 {
				return nil, protowire.ParseError(n)
			}
		} else if num == 3 && typ == protowire.BytesType {
			// contentEncoding: the API server sets none; anything else
			// is not a list this code can read.
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			if len(v) > 0 {
				return nil, errNotProtobuf
			}
			n = m
		} else if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return raw, nil
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
