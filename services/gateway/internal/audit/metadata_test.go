package audit

import (
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDecodeMetadata: the metadata of an object core took is read as
// json.Unmarshal reads it, without the rest; a body core refused fills
// nothing unless it is JSON.
func TestDecodeMetadata(t *testing.T) {
	created := &metav1.Status{Code: http.StatusCreated}
	tests := []struct {
		name    string
		body    string
		status  *metav1.Status
		want    objectMeta
		wantErr bool
	}{
		{"taken", `{"data":{"metadata":{"name":"x"}},"metadata":{"name":"a","namespace":"n"},"Metadata":{"uid":"u"}}`, created, objectMeta{Name: "a", Namespace: "n", UID: "u"}, false},
		{"escaped key", `{"met\u0061data":{"name":"a"}}`, created, objectMeta{Name: "a"}, false},
		{"metadata of another type", `{"metadata":"a"}`, created, objectMeta{}, true},
		{"refused, not JSON", `{"metadata":{"name":"a"},`, &metav1.Status{Code: http.StatusBadRequest}, objectMeta{}, true},
		{"refused, JSON", `{"metadata":{"name":"a"}}`, &metav1.Status{Code: http.StatusUnprocessableEntity}, objectMeta{Name: "a"}, false},
		{"no status", `{"metadata":{"name":"a"}`, nil, objectMeta{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeMetadata([]byte(tt.body), tt.status)
			if (err != nil) != tt.wantErr || (err == nil && got != tt.want) {
				t.Errorf("decodeMetadata = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestWithoutManagedFields: managedFields go from an object and from a
// list's items, however the key is spelled in JSON, and a body that
// cannot hold the key is kept byte for byte.
func TestWithoutManagedFields(t *testing.T) {
	tests := []struct{ name, raw, want string }{
		{"none", `{"metadata":{"name":"a"},"data":{"b":"1","a":"<"}}`, `{"metadata":{"name":"a"},"data":{"b":"1","a":"<"}}`},
		{"not JSON", `{"metadata":`, `{"metadata":`},
		{"object", `{"metadata":{"name":"a","managedFields":[{"manager":"m"}]},"data":{"k":"v"}}`, `{"metadata":{"name":"a"},"data":{"k":"v"}}`},
		{"object with an escape elsewhere", `{"metadata":{"managedFields":[]},"data":{"k":"\u003c"}}`, `{"metadata":{},"data":{"k":"\u003c"}}`},
		{"escaped key", `{"metadata":{"name":"a","managedFi\u0065lds":[{"manager":"m"}]}}`, `{"metadata":{"name":"a"}}`},
		{"list", `{"items":[{"metadata":{"name":"a","managedFields":[]}},{"metadata":{"name":"b"}}],"metadata":{}}`, `{"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}],"metadata":{}}`},
		{"elsewhere", `{"metadata":{"name":"a"},"spec":{"managedFields":1}}`, `{"metadata":{"name":"a"},"spec":{"managedFields":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(withoutManagedFields([]byte(tt.raw))); got != tt.want {
				t.Errorf("withoutManagedFields(%s) = %s, want %s", tt.raw, got, tt.want)
			}
		})
	}
}
