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
