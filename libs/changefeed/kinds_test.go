package changefeed_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/changefeed"
	"kplane.dev/libs/storage"
	proto "kplane.dev/proto/changefeed"
)

// TestOtherResources checks that WithKinds alone keeps resources it does
// not name off the stream, and that WithOtherResources publishes them
// (custom resources) under their stored apiVersion and kind.
func TestOtherResources(t *testing.T) {
	const (
		marker = `{"apiVersion":"zz.example.com/v1","kind":"Marker","metadata":{"namespace":"ns","name":"m1"}}`
		widget = `{"apiVersion":"example.com/v2","kind":"Widget","metadata":{"namespace":"ns","name":"w1"},"spec":{"size":1}}`
	)
	kinds := changefeed.WithKinds(map[schema.GroupResource]schema.GroupVersionKind{{Group: "zz.example.com", Resource: "markers"}: {Group: "zz.example.com", Version: "v1", Kind: "Marker"}})
	tests := []struct {
		name       string
		opts       []changefeed.Option
		wantWidget bool
	}{
		{name: "named kinds only", opts: []changefeed.Option{kinds}},
		{name: "and the others", opts: []changefeed.Option{kinds, changefeed.WithOtherResources()}, wantWidget: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			// The marker's key sorts after the widget's and is written
			// after it: once the marker is seen, the widget was either
			// published or left out.
			for _, kv := range [][2]string{
				{storage.NewKeys(prefix, "example.com", "widgets").Object("ns", "w1"), widget},
				{storage.NewKeys(prefix, "zz.example.com", "markers").Object("ns", "m1"), marker},
			} {
				if _, err := f.etcd.Put(context.Background(), kv[0], kv[1]); err != nil {
					t.Fatal(err)
				}
			}
			f.runPublisher(t, tt.opts...)
			events := f.subscribe(t, proto.SubjectRoot+".>", 0).waitForName(t, "m1")
			var got *proto.Event
			for i := range events {
				if events[i].Name == "w1" {
					got = &events[i]
				}
			}
			switch {
			case got == nil && tt.wantWidget:
				t.Fatalf("widget w1 not published: %+v", summary(events))
			case got != nil && !tt.wantWidget:
				t.Fatalf("widget w1 published without WithOtherResources: %+v", *got)
			case got != nil && (got.Group != "example.com" || got.Version != "v2" || got.Kind != "Widget" || got.Resource != "widgets"):
				t.Errorf("widget w1 published as %s/%s %s (%s), want example.com/v2 Widget (widgets)", got.Group, got.Version, got.Kind, got.Resource)
			}
		})
	}
}
