package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// unaryClient sends a request over HTTP/1.1 and reads its answer on the
// caller's goroutine.
//
// net/http's Transport gives each connection a goroutine that writes
// requests and one that reads answers, and hands every request and
// answer across to them over channels; a request's answer then waits for
// the reader to learn that its body was read before the connection is
// free. Here the handler's goroutine writes the request, waits in the
// network poller for the answer and reads it, and the connection goes
// back to the pool when the body's last byte is read. BenchmarkForward
// (both ends of the hop, 16 requests at once, medians of 5 alternating
// runs): a get 64.0 → 54.1 µs, a create 69.0 → 56.8 µs, 17 fewer
// allocations each.
//
// It serves the requests whose every byte is known before sending
// (headers and a body held in memory); a request that streams its body,
// waits for 100-continue or upgrades the connection goes to net/http's
// Transport, which handles those.
type unaryClient struct {
	tlsConfig *tls.Config
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	// idleTimeout closes a connection idle for longer; maxIdle bounds the
	// idle connections kept per address.
	idleTimeout time.Duration
	maxIdle     int

	mu sync.Mutex
	// idle holds each address's idle connections, the most recently used
	// last: it is taken first, so the others age out when a burst is over.
	idle map[string][]*clientConn
}

func newUnaryClient(tlsConfig *tls.Config) *unaryClient {
	return &unaryClient{
		tlsConfig:   tlsConfig,
		dial:        dialer().DialContext,
		idleTimeout: backendIdleTimeout,
		maxIdle:     maxIdleUnary,
		idle:        map[string][]*clientConn{},
	}
}

// clientConn is one HTTP/1.1 connection to a replica address.
type clientConn struct {
	addr string
	tc   *tls.Conn
	// raw is the TCP connection under tc, checked for a close by the
	// replica before the connection is used again.
	raw net.Conn
	br  *bufio.Reader
	bw  *bufio.Writer
	// expire closes the connection when it has been idle too long.
	expire *time.Timer
	// reused is set once the connection has carried an answer.
	reused bool
}

// handshakeTimeout bounds a TLS handshake with a replica, as
// http.Transport's TLSHandshakeTimeout does.
const handshakeTimeout = 10 * time.Second

// sendable reports whether the unary client can send r: it knows r's
// body (held in memory, or none) and r neither upgrades the connection
// nor waits for 100-continue.
func sendable(r *http.Request) bool {
	return r.Header.Get("Upgrade") == "" && r.Header.Get("Expect") == ""
}

// roundTrip sends r, with body as its body, to the replica at addr. A
// request that may be sent twice is sent again on a new connection when
// a connection used before failed before any of its answer arrived, as
// net/http's Transport does.
func (c *unaryClient) roundTrip(r *http.Request, addr string, body []byte) (*http.Response, error) {
	for {
		cc, err := c.get(r.Context(), addr)
		if err != nil {
			return nil, err
		}
		resp, err := c.exchange(cc, r, body)
		if err == nil {
			return resp, nil
		}
		cc.close()
		var early *earlyError
		if !cc.reused || !errors.As(err, &early) || !retriable(r) || r.Context().Err() != nil {
			return nil, err
		}
	}
}

// earlyError is a failure on a connection before any of the answer
// arrived: on a connection used before, most likely a close by the
// replica that crossed the request, as when the replica restarted.
type earlyError struct{ err error }

func (e *earlyError) Error() string { return e.err.Error() }
func (e *earlyError) Unwrap() error { return e.err }

// exchange writes r on cc and reads the head of its answer. The answer's
// body reads from cc, which goes back to the pool once the body is read
// to its end.
func (c *unaryClient) exchange(cc *clientConn, r *http.Request, body []byte) (*http.Response, error) {
	ctx := r.Context()
	// A request given up on (the client went away, its timeout passed)
	// unblocks whatever waits on the connection; the connection is not
	// used again.
	stop := context.AfterFunc(ctx, func() { _ = cc.tc.SetDeadline(time.Unix(1, 0)) })
	if err := writeRequest(cc.bw, r, body); err != nil {
		stop()
		return nil, &earlyError{ctxErr(ctx, err)}
	}
	if err := cc.bw.Flush(); err != nil {
		stop()
		return nil, &earlyError{ctxErr(ctx, err)}
	}
	for {
		if _, err := cc.br.Peek(1); err != nil {
			stop()
			return nil, &earlyError{ctxErr(ctx, err)}
		}
		resp, err := http.ReadResponse(cc.br, r)
		if err != nil {
			stop()
			return nil, ctxErr(ctx, err)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				stop()
				return nil, errors.New("replica switched protocols on a request that did not ask to")
			}
			// An informational answer (103) precedes the real one.
			continue
		}
		keep := !resp.Close && !r.Close
		if resp.Body == http.NoBody {
			// Nothing more is on the connection (a 204, an answer to a
			// HEAD): it is free now, whether or not the body is read.
			c.release(cc, stop() && keep)
			return resp, nil
		}
		resp.Body = &answerBody{body: resp.Body, client: c, conn: cc, stop: stop, keep: keep}
		return resp, nil
	}
}

// writeRequest writes r with body as its body. Request.Write flushes the
// headers on their own before a body it does not know to be in memory,
// as a bytes.Reader is.
func writeRequest(w *bufio.Writer, r *http.Request, body []byte) error {
	out := *r
	out.Body = nil
	if len(body) > 0 {
		out.Body = io.NopCloser(bytes.NewReader(body))
	}
	out.ContentLength = int64(len(body))
	return out.Write(w)
}

// ctxErr is err, or the context's error when the request was given up
// on and err is what that did to the connection.
func ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// answerBody is an answer's body. Read to its end it gives the
// connection back to the pool; closed before that it closes the
// connection, since the rest of the answer is still on it.
type answerBody struct {
	body   io.ReadCloser
	client *unaryClient
	conn   *clientConn
	stop   func() bool
	keep   bool
	done   atomic.Bool
}

func (b *answerBody) Read(p []byte) (int, error) {
	if b.done.Load() {
		return 0, io.EOF
	}
	n, err := b.body.Read(p)
	if err != nil {
		b.finish(err == io.EOF)
	}
	return n, err
}

func (b *answerBody) Close() error {
	b.finish(false)
	return nil
}

// finish gives the connection back, when the answer was read whole and
// the request was not given up on, or closes it.
func (b *answerBody) finish(whole bool) {
	if !b.done.CompareAndSwap(false, true) {
		return
	}
	b.client.release(b.conn, b.stop() && whole && b.keep)
}

// release gives cc back to the pool when it can carry another request,
// and closes it otherwise.
func (c *unaryClient) release(cc *clientConn, reusable bool) {
	if !reusable {
		cc.close()
		return
	}
	cc.reused = true
	c.put(cc)
}

// get takes the most recently used idle connection to addr that the
// replica has not closed, or dials a new one.
func (c *unaryClient) get(ctx context.Context, addr string) (*clientConn, error) {
	for {
		c.mu.Lock()
		conns := c.idle[addr]
		if len(conns) == 0 {
			c.mu.Unlock()
			return c.connect(ctx, addr)
		}
		cc := conns[len(conns)-1]
		conns[len(conns)-1] = nil
		c.idle[addr] = conns[:len(conns)-1]
		c.mu.Unlock()
		if !cc.expire.Stop() {
			// It is expiring; the timer closes it.
			continue
		}
		if closedByPeer(cc.raw) {
			cc.close()
			continue
		}
		return cc, nil
	}
}

// put keeps cc for the next request to its address, or closes it when
// enough are kept.
func (c *unaryClient) put(cc *clientConn) {
	c.mu.Lock()
	conns := c.idle[cc.addr]
	if len(conns) >= c.maxIdle {
		c.mu.Unlock()
		cc.close()
		return
	}
	c.idle[cc.addr] = append(conns, cc)
	cc.expire.Reset(c.idleTimeout)
	c.mu.Unlock()
}

// drop removes cc from the idle connections and closes it, when it is
// still there: the expiry timer's work.
func (c *unaryClient) drop(cc *clientConn) {
	c.mu.Lock()
	conns := c.idle[cc.addr]
	for i, x := range conns {
		if x == cc {
			c.idle[cc.addr] = append(conns[:i:i], conns[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	cc.close()
}

// closeIdle closes every idle connection.
func (c *unaryClient) closeIdle() {
	c.mu.Lock()
	idle := c.idle
	c.idle = map[string][]*clientConn{}
	c.mu.Unlock()
	for _, conns := range idle {
		for _, cc := range conns {
			cc.expire.Stop()
			cc.close()
		}
	}
}

// connect dials addr and shakes hands over TLS.
func (c *unaryClient) connect(ctx context.Context, addr string) (*clientConn, error) {
	raw, err := c.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, c.tlsConfig)
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = raw.Close()
		return nil, err
	}
	cc := &clientConn{addr: addr, tc: tc, raw: raw, br: bufio.NewReaderSize(tc, bufferSize), bw: bufio.NewWriterSize(tc, bufferSize)}
	cc.expire = time.AfterFunc(time.Hour, func() { c.drop(cc) })
	cc.expire.Stop()
	return cc, nil
}

// bufferSize is the size of a connection's read and write buffers,
// http.Transport's.
const bufferSize = 4 << 10

func (cc *clientConn) close() { _ = cc.tc.Close() }
