package rest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/kubeproto"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/storage"
)

// minWatchTimeout is kube-apiserver's --min-request-timeout: a watch
// without timeoutSeconds ends after a random time between it and twice
// it, so that clients reconnecting spread out over the replicas.
const minWatchTimeout = 30 * time.Minute

// WithWatchTimeout sets how long a watch without timeoutSeconds lasts;
// the default is a random time between 30 and 60 minutes, like kube.
func WithWatchTimeout(f func() time.Duration) Option {
	return func(h *Handler) { h.watchTimeout = f }
}

func defaultWatchTimeout() time.Duration {
	return time.Duration(float64(minWatchTimeout) * (1 + rand.Float64()))
}

// watch answers ?watch=true and /watch/ paths.
func (h *Handler) watch(c echo.Context, info *requestinfo.Info) error {
	opts, err := h.listOptions(c.QueryParams(), info)
	if err != nil {
		return err
	}
	return h.serveWatch(c, info, opts)
}

// serveWatch streams the changes opts selects as JSON watch events, one
// per line, each flushed as it is written. It ends when the store ends the
// watch, when the timeout passes, or when the client goes away.
func (h *Handler) serveWatch(c echo.Context, info *requestinfo.Info, opts *metainternalversion.ListOptions) error {
	req := c.Request()
	o := h.offers
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents && opts.AllowWatchBookmarks {
		// A watch-list (kube's isListWatchRequest) stands for a list:
		// kube offers no table for it, so a client asking only for a
		// table gets 406 and one that also accepts JSON gets JSON.
		o.table = false
	}
	out, err := negotiate(req, true, o)
	if err != nil {
		return err
	}
	topts, err := tableOptions(c.QueryParams(), out)
	if err != nil {
		return err
	}
	if out.as != nil && out.as.Kind == "PartialObjectMetadataList" {
		// Each event carries one object; a list of metadata is its
		// metadata.
		gvk := out.as.GroupVersion().WithKind("PartialObjectMetadata")
		out.as = &gvk
	}
	flusher, ok := c.Response().Writer.(http.Flusher)
	if !ok {
		return fmt.Errorf("serve watch: response writer %T cannot flush", c.Response().Writer)
	}

	timeout := h.watchTimeout()
	if opts.TimeoutSeconds != nil && *opts.TimeoutSeconds > 0 {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	defer cancel()
	w, err := h.store.Watch(ctx, h.collectionPrefix(info), storage.WatchOptions{
		ResourceVersion:      opts.ResourceVersion,
		ResourceVersionMatch: opts.ResourceVersionMatch,
		Predicate:            h.predicate(opts),
		AllowBookmarks:       opts.AllowWatchBookmarks,
		SendInitialEvents:    opts.SendInitialEvents,
		// Events are encoded, never changed.
		Shared: true,
	})
	if err != nil {
		return apistatus.FromStorage(err, h.r.GroupResource(), "")
	}
	defer w.Stop()
	defer h.watchMetrics.watchStarted(h.r.GroupVersionKind())()

	resp := c.Response()
	contentType := mediaJSON
	if out.protobuf {
		contentType = kubeproto.StreamMediaType
	}
	resp.Header().Set(echo.HeaderContentType, contentType)
	resp.WriteHeader(http.StatusOK)
	flusher.Flush()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			if err := h.writeEvent(resp, ev, out, topts); err != nil {
				// The stream has begun: all a client can get now is its
				// end. A client gone is no error of the server's.
				if !errors.Is(err, errWrite) {
					h.log.Error("encode watch event", "resource", h.r.GroupVersionResource.String(), "error", err)
				}
				return nil
			}
			if len(w.ResultChan()) == 0 {
				// Events already waiting go out in the same write, as
				// kube-apiserver's watch server sends them.
				flusher.Flush()
			}
			if topts != nil {
				// Only the first table of a watch carries the headers.
				topts.NoHeaders = true
			}
		}
	}
}

// errWrite is a failure to write to the client, which ends the stream.
var errWrite = errors.New("write to the client")

// writeEvent writes one event of the stream: a JSON line or a protobuf
// frame.
func (h *Handler) writeEvent(w io.Writer, ev watch.Event, out output, topts *metav1.TableOptions) error {
	obj, err := h.eventObject(ev, out, topts)
	if err != nil {
		return err
	}
	encode := jsonObject
	if out.protobuf {
		encode = kubeproto.Encode
	}
	var raw []byte
	if obj == ev.Object && ev.Type != watch.Bookmark && ev.Type != watch.Error {
		// The object as stored, the same for every watch of the
		// resource.
		raw, err = h.encodings.encode(obj, ev.Type == watch.Deleted, out.protobuf, encode)
	} else {
		raw, err = encode(obj)
	}
	if err != nil {
		return fmt.Errorf("encode %s event: %w", ev.Type, err)
	}
	var frame []byte
	if out.protobuf {
		if frame, err = kubeproto.EventFrame(string(ev.Type), raw); err != nil {
			return err
		}
	} else {
		// What json.Marshal makes of a metav1.WatchEvent, without
		// encoding the object again: the event types need no escaping.
		frame = make([]byte, 0, len(raw)+len(ev.Type)+24)
		frame = append(frame, `{"type":"`...)
		frame = append(frame, ev.Type...)
		frame = append(frame, `","object":`...)
		frame = append(frame, raw...)
		frame = append(frame, "}\n"...)
	}
	if _, err := w.Write(frame); err != nil {
		return errWrite
	}
	h.watchMetrics.eventSent(h.r.GroupVersionKind(), len(frame))
	return nil
}

// jsonObject is obj as a watch event's object, as json.Marshal writes
// it inside a metav1.WatchEvent.
func jsonObject(obj runtime.Object) ([]byte, error) {
	return objects.JSON(obj)
}

// eventObject is an event's object in the negotiated form; an ERROR
// event carries a Status, and the bookmark ending a watch's initial
// events the list blueprint.
func (h *Handler) eventObject(ev watch.Event, out output, topts *metav1.TableOptions) (runtime.Object, error) {
	obj := ev.Object
	if ev.Type == watch.Bookmark {
		var err error
		if obj, err = h.withListBlueprint(obj, out); err != nil {
			return nil, err
		}
	}
	if st, ok := obj.(*metav1.Status); ok {
		st = st.DeepCopy()
		st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
		obj = st
	} else {
		var err error
		if obj, err = h.transform(obj, out, topts); err != nil {
			return nil, fmt.Errorf("convert %s event: %w", ev.Type, err)
		}
	}
	return obj, nil
}

// initialEventsListBlueprintAnnotation is where kube-apiserver puts the
// list blueprint. client-go 1.32, listing through a watch-list (its
// WatchListClient gate), requires it and otherwise lists a second time;
// the apimachinery kplane builds on no longer names the key.
const initialEventsListBlueprintAnnotation = "kubernetes.io/initial-events-list-blueprint"

// withListBlueprint returns the bookmark that ends a watch's initial
// events annotated, as kube-apiserver annotates it, with an empty list of
// the resource in the negotiated form, base64-encoded: client-go turns a
// watch-list into the list a List call returns by it, and refuses the
// stream without it. Other bookmarks are returned as they are.
func (h *Handler) withListBlueprint(bookmark runtime.Object, out output) (runtime.Object, error) {
	m, err := meta.Accessor(bookmark)
	if err != nil || m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
		return bookmark, nil
	}
	list := h.r.Objects.NewList()
	if out.as != nil && out.as.Kind == "PartialObjectMetadata" {
		list = &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: out.as.GroupVersion().String(), Kind: "PartialObjectMetadataList"}}
	}
	if err := meta.SetList(list, []runtime.Object{}); err != nil {
		return nil, fmt.Errorf("empty the list blueprint: %w", err)
	}
	var encoded []byte
	if out.protobuf {
		encoded, err = kubeproto.Encode(list)
	} else {
		encoded, err = objects.JSON(list)
	}
	if err != nil {
		return nil, fmt.Errorf("encode the list blueprint: %w", err)
	}
	// The store made the bookmark for this watch alone, but a copy
	// costs little and keeps that the store's business.
	bookmark = bookmark.DeepCopyObject()
	if m, err = meta.Accessor(bookmark); err != nil {
		return nil, err
	}
	annotations := maps.Clone(m.GetAnnotations())
	annotations[initialEventsListBlueprintAnnotation] = base64.StdEncoding.EncodeToString(encoded)
	m.SetAnnotations(annotations)
	return bookmark, nil
}
