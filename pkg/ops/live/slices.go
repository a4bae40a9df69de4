package live

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
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
// while the API server waits. slicesParallel decodes the slices on every
// core, and asks for the next page as soon as a page's list metadata has
// arrived: the API server writes it before the items (its streaming
// protobuf encoder does), and the continue token is all the next request
// needs. The server then prepares the next page while this one is still
// being sent, read and decoded, instead of the two taking turns.

// errNotProtobuf: the server answered in another encoding; the caller
// lists the ordinary way.
var errNotProtobuf = errors.New("list not encoded as protobuf")

// pagesInFlight is how many page requests are open at once: a page being
// read, and the next one, asked for as soon as the first one's metadata
// arrived.
const pagesInFlight = 2

// slicesParallel lists ResourceSlices page by page, decoding the slices of
// each page in parallel with the next requests. The result is in the
// server's order.
func (c *Client) slicesParallel(ctx context.Context, fieldSelector string, fields SliceFields) ([]*resourcev1.ResourceSlice, error) {
	// A fake clientset has no REST client.
	rc, ok := c.cs.ResourceV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return nil, errNotProtobuf
	}
	// A failed page stops the pages already asked for.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Pages are read, and their items decoded, in goroutines, into their
	// page's slots. The work queue is long enough that handing out a
	// page's work never holds up reading.
	var (
		pages    []*[]*resourcev1.ResourceSlice
		wg       sync.WaitGroup
		mu       sync.Mutex
		bad      error
		work     = make(chan func(*poolDecoder), 1024)
		inFlight = make(chan struct{}, pagesInFlight)
		// A page's bytes are read into a buffer that goes back to bufs
		// once its slices are decoded: the next pages reuse it rather than
		// growing a new one. (A sync.Pool would lose them to every
		// garbage collection, which a list of thousands of slices causes
		// many of.)
		bufs = make(chan *bytes.Buffer, pagesInFlight+2)
	)
	// The first failure is the list's: it cancels the requests in
	// flight, whose own failures say only that.
	fail := func(err error) {
		mu.Lock()
		if bad == nil {
			bad = err
		}
		mu.Unlock()
		cancel()
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
	// decodePage hands out the decoding of one page's items to the
	// workers; buf goes back to bufs once they are done.
	decodePage := func(page *[]*resourcev1.ResourceSlice, buf *bytes.Buffer) error {
		_, items, err := splitList(buf.Bytes())
		if err != nil {
			return fmt.Errorf("decoding a page of ResourceSlices: %w", err)
		}
		out := make([]*resourcev1.ResourceSlice, len(items))
		*page = out
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
						fail(fmt.Errorf("decoding a ResourceSlice: %w", err))
						return
					}
					out[i] = s
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
		return nil
	}
	opts := metav1.ListOptions{FieldSelector: fieldSelector, Limit: c.pageSize()}
	for {
		var buf *bytes.Buffer
		select {
		case buf = <-bufs:
			buf.Reset()
		default:
			buf = new(bytes.Buffer)
		}
		// At most pagesInFlight requests are open at once.
		select {
		case inFlight <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		body, err := openPage(ctx, rc, &opts)
		if err != nil {
			<-inFlight
			fail(err)
			break
		}
		cont, err := readListMeta(body, buf)
		if err != nil {
			body.Close()
			<-inFlight
			fail(err)
			break
		}
		page := new([]*resourcev1.ResourceSlice)
		pages = append(pages, page)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := readPage(body, buf)
			body.Close()
			<-inFlight
			if err == nil {
				err = decodePage(page, buf)
			}
			if err != nil {
				fail(err)
			}
		}()
		if cont == "" {
			break
		}
		opts.Continue = cont
	}
	wg.Wait()
	if bad != nil {
		return nil, bad
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]*resourcev1.ResourceSlice, 0, len(pages)*int(max(opts.Limit, 1)))
	for _, p := range pages {
		out = append(out, *p...)
	}
	return out, nil
}

// openPage requests one page of ResourceSlices as protobuf. A server that
// refuses protobuf is errNotProtobuf.
func openPage(ctx context.Context, rc *rest.RESTClient, opts *metav1.ListOptions) (io.ReadCloser, error) {
	body, err := rc.Get().Resource("resourceslices").VersionedParams(opts, scheme.ParameterCodec).
		SetHeader("Accept", k8sruntime.ContentTypeProtobuf).Stream(ctx)
	if apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err) {
		return nil, errNotProtobuf
	}
	// Stream returns the Status the server sent (forbidden, expired) as
	// a typed client's List does.
	return body, err
}

// readListMeta reads body into buf until the list's continue token has
// arrived, and returns it. An answer that is not a protobuf list, or one
// that does not put the list metadata first, is read to its end, and the
// token is read from the whole list.
func readListMeta(body io.Reader, buf *bytes.Buffer) (string, error) {
	for {
		meta, err := listMetaPrefix(buf.Bytes())
		if err != nil {
			return "", err
		}
		if meta != nil {
			return meta.Continue, nil
		}
		buf.Grow(64 << 10)
		room := buf.AvailableBuffer()
		n, err := body.Read(room[:cap(room)])
		buf.Write(room[:n])
		if err == io.EOF {
			raw, err := unwrap(buf.Bytes())
			if err != nil {
				return "", err
			}
			meta, _, err := splitList(raw)
			return meta.Continue, err
		}
		if err != nil {
			return "", err
		}
	}
}

// readPage reads the rest of a page (body) into buf, then moves the list
// it holds out of its envelope to the front of buf. A server that did not
// answer in protobuf is errNotProtobuf.
func readPage(body io.Reader, buf *bytes.Buffer) error {
	if _, err := buf.ReadFrom(body); err != nil {
		return err
	}
	raw, err := unwrap(buf.Bytes())
	if err != nil {
		return err
	}
	n := copy(buf.Bytes(), raw)
	buf.Truncate(n)
	return nil
}

// listMetaPrefix reads the list metadata of an enveloped list from its
// first bytes b: the envelope's magic number, its type (field 1), then its
// object (field 2), whose first field is the list metadata. It returns
// nil, and no error, when b does not hold all of that yet or is laid out
// otherwise (which readListMeta then reads from the whole list), and
// errNotProtobuf when b is no protobuf envelope.
func listMetaPrefix(b []byte) (*metav1.ListMeta, error) {
	magic := []byte{'k', '8', 's', 0}
	if len(b) < len(magic) {
		if !bytes.HasPrefix(magic, b) {
			return nil, errNotProtobuf
		}
		return nil, nil
	}
	if !bytes.HasPrefix(b, magic) {
		return nil, errNotProtobuf
	}
	b = b[len(magic):]
	// field consumes the tag and the length of a length-delimited field
	// num; ok is false when b is shorter or holds something else.
	field := func(num protowire.Number) (length, n int, ok bool) {
		got, typ, t := protowire.ConsumeTag(b)
		if t < 0 || got != num || typ != protowire.BytesType {
			return 0, 0, false
		}
		v, l := protowire.ConsumeVarint(b[t:])
		if l < 0 || v > math.MaxInt32 {
			return 0, 0, false
		}
		return int(v), t + l, true
	}
	// The envelope's type, which an envelope may leave out.
	if length, n, ok := field(1); ok {
		if len(b) < n+length {
			return nil, nil
		}
		b = b[n+length:]
	}
	_, n, ok := field(2)
	if !ok {
		return nil, nil
	}
	b = b[n:]
	length, n, ok := field(1)
	if !ok || len(b) < n+length {
		return nil, nil
	}
	meta := new(metav1.ListMeta)
	if err := meta.Unmarshal(b[n : n+length]); err != nil {
		return nil, err
	}
	return meta, nil
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
