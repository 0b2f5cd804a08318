package rest

import (
	"net/http/httptest"
	"testing"
)

func TestNegotiate(t *testing.T) {
	for _, tc := range []struct {
		name, accept, userAgent, query string
		stream                         bool
		// noProtobuf is a kind without protobuf code (a custom
		// resource); noTable a resource without a table (a review).
		noProtobuf, noTable bool
		// errors negotiates the form of a Status, as Serve does.
		errors bool
		want   string // "json", "yaml", "protobuf", a conversion kind (in protobuf: "protobuf "+kind), or "406"
		pretty bool
	}{
		{name: "no accept", want: "json"},
		{name: "anything", accept: "*/*", want: "json"},
		{name: "application wildcard", accept: "application/*", want: "json"},
		{name: "yaml", accept: "application/yaml", want: "yaml"},
		{name: "client-go protobuf then json", accept: "application/vnd.kubernetes.protobuf,application/json", want: "protobuf"},
		{name: "client-go protobuf then json, custom resource", accept: "application/vnd.kubernetes.protobuf,application/json", noProtobuf: true, want: "json"},
		{name: "protobuf preferred by quality", accept: "application/json;q=0.9,application/vnd.kubernetes.protobuf", want: "protobuf"},
		{name: "protobuf only, custom resource", accept: "application/vnd.kubernetes.protobuf", noProtobuf: true, want: "406"},
		{name: "protobuf table is refused", accept: "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io", want: "406"},
		{name: "protobuf table falls through to json", accept: "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json", want: "json"},
		{name: "table of a review", accept: "application/json;as=Table;v=v1;g=meta.k8s.io", noTable: true, want: "406"},
		{name: "metadata of a review", accept: "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io", noTable: true, want: "PartialObjectMetadata"},
		{name: "stream protobuf", accept: "application/vnd.kubernetes.protobuf;stream=watch", stream: true, want: "protobuf"},
		{name: "stream protobuf without the param", accept: "application/vnd.kubernetes.protobuf", stream: true, want: "protobuf"},
		{name: "stream protobuf, custom resource", accept: "application/vnd.kubernetes.protobuf", stream: true, noProtobuf: true, want: "406"},
		{name: "quality order", accept: "application/json;q=0.5, application/yaml", want: "yaml"},
		{name: "kubectl table", accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", want: "Table"},
		{name: "table v1beta1", accept: "application/json;as=Table;v=v1beta1;g=meta.k8s.io", want: "Table"},
		{name: "metadata client", accept: "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", want: "protobuf PartialObjectMetadataList"},
		{name: "metadata client, custom resource", accept: "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", noProtobuf: true, want: "protobuf PartialObjectMetadataList"},
		{name: "metadata v1beta1 of a custom resource", accept: "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1", noProtobuf: true, want: "protobuf PartialObjectMetadata"},
		{name: "stream metadata of a custom resource", accept: "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json", stream: true, noProtobuf: true, want: "protobuf PartialObjectMetadata"},
		{name: "group without kind", accept: "application/json;g=meta.k8s.io", want: "406"},
		{name: "unknown conversion falls through", accept: "application/json;as=Foo;v=v1;g=meta.k8s.io, application/yaml", want: "yaml"},
		{name: "conversion in another group", accept: "application/json;as=Table;v=v1;g=example.com", want: "406"},
		{name: "protobuf only", accept: "application/vnd.kubernetes.protobuf", want: "protobuf"},
		{name: "html", accept: "text/html", want: "406"},
		{name: "stream yaml", accept: "application/yaml", stream: true, want: "406"},
		{name: "stream json", accept: "application/json;stream=watch", stream: true, want: "json"},
		{name: "stream param on a non-stream", accept: "application/json;stream=watch", want: "json"},
		{name: "stream param on yaml", accept: "application/yaml;stream=watch", want: "406"},
		{name: "stream of another kind", accept: "application/json;stream=other", stream: true, want: "406"},
		{name: "stream takes the first clause", accept: "application/yaml, application/json", stream: true, want: "406"},
		{name: "error of a custom resource in protobuf", accept: "application/vnd.kubernetes.protobuf", noProtobuf: true, errors: true, want: "protobuf"},
		{name: "error skips a conversion", accept: "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json", errors: true, want: "json"},
		{name: "error with only a conversion", accept: "application/json;as=Table;v=v1;g=meta.k8s.io", errors: true, want: "406"},
		{name: "error of a watch in yaml", accept: "application/yaml", errors: true, want: "yaml"},
		{name: "curl is pretty", userAgent: "curl/8.0", want: "json", pretty: true},
		{name: "pretty=false wins over curl", userAgent: "curl/8.0", query: "pretty=false", want: "json"},
		{name: "pretty param", query: "pretty=1", want: "json", pretty: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/api/v1/configmaps?"+tc.query, nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			req.Header.Set("User-Agent", tc.userAgent)
			o := offer{protobuf: !tc.noProtobuf, table: !tc.noTable}
			if tc.errors {
				o = errorOffer
			}
			out, err := negotiate(req, tc.stream, o)
			got := "json"
			switch {
			case err != nil:
				got = "406"
			case out.as != nil && out.protobuf:
				got = "protobuf " + out.as.Kind
			case out.as != nil:
				got = out.as.Kind
			case out.yaml:
				got = "yaml"
			case out.protobuf:
				got = "protobuf"
			}
			if got != tc.want || (err == nil && out.pretty != tc.pretty) {
				t.Errorf("negotiate(%q) = %s pretty %v (%v), want %s pretty %v", tc.accept, got, out.pretty, err, tc.want, tc.pretty)
			}
		})
	}
}
