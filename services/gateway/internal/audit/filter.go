package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/services/gateway/internal/audit/policy"
)

const (
	// maxUserAgent is kube's bound of a recorded user agent.
	maxUserAgent = 1024
	// maxObject bounds a recorded request or response body: kube's
	// limit of a write's body. A larger body is not recorded.
	maxObject = 3 << 20
	// maxFields bounds a body read only for a few of its fields: a
	// failure's Status, a create's name.
	maxFields = 64 << 10
)

// Filter audits each request by the policy; it runs after
// authentication, as kube's does, so that the policy sees the
// authenticated user, and it needs WithID outside it.
func (a *Auditor) Filter(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		ra := from(r.Context())
		u, _ := frontproxy.UserFrom(r.Context())
		info := a.info(c)
		attrs := policy.Attributes{Info: info}
		if u != nil {
			attrs.User, attrs.Groups = u.Name, u.Groups
		}
		d := a.policy.Evaluate(attrs)
		a.metrics.levels.WithLabelValues(string(d.Level)).Inc()
		if d.Level == auditv1.LevelNone || ra == nil {
			return next(c)
		}
		rec := &record{a: a, ra: ra, decision: d, longRunning: a.longRunning(info), ev: newEvent(r, ra, u, info, d.Level)}
		rec.emit(auditv1.StageRequestReceived)
		if r.Body != nil && r.Body != http.NoBody && (atLeast(d.Level, auditv1.LevelRequest) || info.Verb == "create") {
			limit := maxObject
			if !atLeast(d.Level, auditv1.LevelRequest) {
				// Only the name is read from a create's body.
				limit = maxFields
			}
			rec.request = &capture{limit: limit}
			r.Body = &teeBody{ReadCloser: r.Body, c: rec.request}
		}
		resp := c.Response()
		w := &responseWriter{ResponseWriter: resp.Writer, rec: rec}
		resp.Writer = w
		defer func() {
			if p := recover(); p != nil {
				rec.panicked(p)
				panic(p)
			}
		}()
		if err := next(c); err != nil {
			c.Error(err)
		}
		rec.complete(r)
		return nil
	}
}

// levelOrder ranks the levels: each records what the ones below do.
var levelOrder = map[auditv1.Level]int{auditv1.LevelNone: 0, auditv1.LevelMetadata: 1, auditv1.LevelRequest: 2, auditv1.LevelRequestResponse: 3}

func atLeast(l, min auditv1.Level) bool { return levelOrder[l] >= levelOrder[min] }

// newEvent is the event of r as kube's NewEventFromRequest makes it.
func newEvent(r *http.Request, ra *requestAudit, u *frontproxy.User, info *requestinfo.Info, level auditv1.Level) auditv1.Event {
	ev := auditv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: auditv1.SchemeGroupVersion.String(), Kind: "Event"},
		Level:                    level,
		AuditID:                  types.UID(ra.id),
		RequestURI:               r.URL.RequestURI(),
		Verb:                     info.Verb,
		UserAgent:                userAgent(r.UserAgent()),
		RequestReceivedTimestamp: metav1.NewMicroTime(ra.received),
	}
	for _, ip := range utilnet.SourceIPs(r) {
		ev.SourceIPs = append(ev.SourceIPs, ip.String())
	}
	if u != nil {
		ev.User = userInfo(u)
	}
	if info.IsResourceRequest {
		ev.ObjectRef = &auditv1.ObjectReference{
			Namespace:   info.Namespace,
			Name:        info.Name,
			Resource:    info.Resource,
			Subresource: info.Subresource,
			APIGroup:    info.APIGroup,
			APIVersion:  info.APIVersion,
		}
	}
	return ev
}

func userAgent(ua string) string {
	if len(ua) > maxUserAgent {
		return ua[:maxUserAgent] + "...TRUNCATED"
	}
	return ua
}

// record is the audit of one request: the event as it grows, stage by
// stage.
type record struct {
	a           *Auditor
	ra          *requestAudit
	decision    policy.Decision
	longRunning bool

	// mu guards ev and started: a response may start from another
	// goroutine than the one that completes it.
	mu      sync.Mutex
	ev      auditv1.Event
	started bool
	// request and response hold the bodies being recorded; nil when not.
	request, response *capture
	contentType       string
}

// eventSize is room for a typical event at Metadata level, so that
// encoding it seldom grows the buffer.
const eventSize = 1536

// emit sends the event at stage unless the policy omits it; the caller
// holds mu or is the only one using rec.
func (rec *record) emit(stage auditv1.Stage) {
	if rec.decision.Omits(stage) {
		return
	}
	ev := rec.ev
	ev.Stage = stage
	ev.StageTimestamp = metav1.NewMicroTime(rec.a.clock.Now())
	rec.ra.fill(&ev)
	data, err := appendEvent(make([]byte, 0, eventSize), &ev)
	if err != nil {
		// No backend gets the event: each counts it as failed.
		rec.a.log.Error("encode audit event", "auditID", ev.AuditID, "err", err)
		for _, b := range rec.a.buffers {
			rec.a.metrics.errors.WithLabelValues(b.Name).Inc()
		}
		return
	}
	rec.a.send(Encoded{AuditID: string(ev.AuditID), Stage: stage, JSON: data})
}

// start records the response's status code, decides which of its body
// to read, and sends ResponseStarted for a long-running request.
func (rec *record) start(code int, h http.Header) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.started {
		return
	}
	rec.started = true
	rec.ev.ResponseStatus = &metav1.Status{Code: int32(code)}
	rec.contentType = h.Get("Content-Type")
	switch {
	case rec.longRunning:
		// A stream is never recorded, as kube records no watch events.
		rec.emit(auditv1.StageResponseStarted)
	case rec.decision.Level == auditv1.LevelRequestResponse:
		rec.response = &capture{limit: maxObject}
	case code >= 300:
		rec.response = &capture{limit: maxFields}
	}
}

// panicked sends the Panic stage, as kube does before the panic goes on.
func (rec *record) panicked(p any) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.ev.ResponseStatus = &metav1.Status{
		Code:    http.StatusInternalServerError,
		Status:  metav1.StatusFailure,
		Reason:  metav1.StatusReasonInternalError,
		Message: fmt.Sprintf("APIServer panic'd: %v", p),
	}
	rec.emit(auditv1.StagePanic)
}

// complete sends ResponseComplete, with what the bodies told.
func (rec *record) complete(r *http.Request) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !rec.started {
		// No status and no body: kube fakes a success, and a
		// long-running request gets its ResponseStarted too.
		rec.started = true
		rec.ev.ResponseStatus = &metav1.Status{Code: http.StatusOK, Status: metav1.StatusSuccess, Message: "Connection closed early"}
		if rec.longRunning {
			rec.emit(auditv1.StageResponseStarted)
		}
	}
	if rec.request != nil {
		rec.recordRequest(r.Header.Get("Content-Type"))
	}
	if rec.response != nil {
		rec.recordResponse()
	}
	rec.emit(auditv1.StageResponseComplete)
}

// recordRequest completes the object reference from the request's
// object, as kube's LogRequestObject does, and records the object at
// level Request and above.
func (rec *record) recordRequest(contentType string) {
	// Below level Request only the metadata is read, which needs no
	// compact copy of the body.
	raw := rec.request.json(contentType, atLeast(rec.decision.Level, auditv1.LevelRequest))
	if raw == nil {
		return
	}
	if md, err := decodeMetadata(raw, rec.ev.ResponseStatus); err == nil && rec.ev.ObjectRef != nil {
		ref := rec.ev.ObjectRef
		ref.Namespace = orElse(ref.Namespace, md.Namespace)
		ref.Name = orElse(ref.Name, md.Name)
		ref.UID = types.UID(orElse(string(ref.UID), md.UID))
		ref.ResourceVersion = orElse(ref.ResourceVersion, md.ResourceVersion)
	}
	if atLeast(rec.decision.Level, auditv1.LevelRequest) {
		rec.ev.RequestObject = rec.object(raw)
	}
}

// objectMeta is what the audit reads of a request's object.
type objectMeta struct {
	Name, Namespace, UID, ResourceVersion string
}

// decodeMetadata decodes the metadata of raw, a request's object, as
// json.Unmarshal of raw would. A body that core took is valid JSON, and
// only its metadata is read: decoding all of it was 5% of the gateway's
// CPU under a load of creates. Any other body is decoded whole, so that
// one that is not JSON fills nothing, as kube's audit of an object it
// could not decode.
func decodeMetadata(raw []byte, status *metav1.Status) (objectMeta, error) {
	var obj struct{ Metadata objectMeta }
	if status != nil && status.Code >= 200 && status.Code < 300 {
		if values, ok := objects.Members(raw, "metadata"); ok {
			for _, v := range values {
				if err := json.Unmarshal(v, &obj.Metadata); err != nil {
					return obj.Metadata, err
				}
			}
			return obj.Metadata, nil
		}
	}
	return obj.Metadata, json.Unmarshal(raw, &obj)
}

// recordResponse copies a Status answer into the response status, as
// kube's LogResponseObject does, and records the object at level
// RequestResponse.
func (rec *record) recordResponse() {
	raw := rec.response.json(rec.contentType, rec.decision.Level == auditv1.LevelRequestResponse)
	if raw == nil {
		return
	}
	var st metav1.Status
	if json.Unmarshal(raw, &st) == nil && st.Kind == "Status" {
		rec.ev.ResponseStatus = &metav1.Status{Status: st.Status, Message: st.Message, Reason: st.Reason, Details: st.Details, Code: st.Code}
	}
	if rec.decision.Level == auditv1.LevelRequestResponse {
		rec.ev.ResponseObject = rec.object(raw)
	}
}

// object is raw as a recorded object, its managedFields dropped when
// the policy says so.
func (rec *record) object(raw []byte) *runtime.Unknown {
	if rec.decision.OmitManagedFields {
		raw = withoutManagedFields(raw)
	}
	return &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
}

// withoutManagedFields drops metadata.managedFields of an object and of
// a list's items. A body that cannot hold the key is kept as it is: a key
// reads as managedFields only if the text spells it, or escapes one of
// its letters as \u. Decoding and encoding the body again was 5% of the
// gateway's CPU under creates of custom resources, whose bodies have no
// managed fields, and as much under updates, whose bodies have.
func withoutManagedFields(raw []byte) []byte {
	if !bytes.Contains(raw, []byte("managedFields")) && !bytes.Contains(raw, []byte(`\u`)) {
		return raw
	}
	// An object, not a list, as updates send them: its managedFields are
	// cut out of the text.
	if items, ok := objects.Members(raw, "items"); ok && len(items) == 0 {
		if out, ok := objects.WithoutMember(raw, "metadata", "managedFields"); ok {
			return out
		}
	}
	var obj map[string]any
	if json.Unmarshal(raw, &obj) != nil {
		return raw
	}
	drop := func(o any) {
		if m, ok := o.(map[string]any); ok {
			if md, ok := m["metadata"].(map[string]any); ok {
				delete(md, "managedFields")
			}
		}
	}
	drop(obj)
	if items, ok := obj["items"].([]any); ok {
		for _, it := range items {
			drop(it)
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return out
}

func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// capture keeps up to limit bytes of a body.
type capture struct {
	limit     int
	buf       bytes.Buffer
	truncated bool
}

func (c *capture) write(p []byte) {
	if c.truncated {
		return
	}
	if c.buf.Len()+len(p) > c.limit {
		c.truncated = true
		c.buf = bytes.Buffer{}
		return
	}
	c.buf.Write(p)
}

// json is the captured body as JSON, compact when compact is set (as
// recorded), or nil when it was cut short, empty, or in a form not read
// here (protobuf of a type the gateway does not know: an aggregated API
// server's). A body that is not compacted may be invalid JSON, which its
// reader finds.
func (c *capture) json(contentType string, compact bool) []byte {
	if c.truncated || c.buf.Len() == 0 {
		return nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil
	}
	var raw []byte
	switch mt {
	case "application/json", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json":
		if !compact {
			return c.buf.Bytes()
		}
		var b bytes.Buffer
		if json.Compact(&b, c.buf.Bytes()) != nil {
			return nil
		}
		raw = b.Bytes()
	case "application/yaml", "application/apply-patch+yaml":
		if raw, err = yaml.YAMLToJSON(c.buf.Bytes()); err != nil {
			return nil
		}
	case runtime.ContentTypeProtobuf:
		// Kube records every object as JSON, whatever its client sent.
		obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(c.buf.Bytes(), nil, nil)
		if err != nil {
			return nil
		}
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
		if raw, err = json.Marshal(obj); err != nil {
			return nil
		}
	default:
		return nil
	}
	return raw
}

// teeBody records what the handler reads of a request body.
type teeBody struct {
	io.ReadCloser
	c *capture
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.c.write(p[:n])
	}
	return n, err
}

// responseWriter tells the record when the response starts and what its
// body is; it passes on flushes and hijacks, which watches and upgrades
// need.
type responseWriter struct {
	http.ResponseWriter
	rec *record
}

func (w *responseWriter) WriteHeader(code int) {
	w.rec.start(code, w.Header())
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.rec.start(http.StatusOK, w.Header())
	if c := w.rec.response; c != nil {
		c.write(p)
	}
	return w.ResponseWriter.Write(p)
}

func (w *responseWriter) Flush() {
	// An error means the writer cannot flush, which nothing here can
	// help.
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *responseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
