package rest_test

import (
	"fmt"
	"net/http"
	"testing"
)

// BenchmarkCreate measures one ConfigMap create through HTTP, the REST
// layer, managedFields and etcd.
func BenchmarkCreate(b *testing.B) {
	f := newWriteFixture(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if r := f.do(b, http.MethodPost, cms, "", fmt.Sprintf(`{"metadata":{"name":"c%d"},"data":{"k":"v"}}`, i)); r.code != http.StatusCreated {
			b.Fatalf("code %d: %s", r.code, r.body)
		}
	}
}

// BenchmarkUpdate measures one unconditional ConfigMap PUT that changes
// data, so each one is written.
func BenchmarkUpdate(b *testing.B) {
	f := newWriteFixture(b)
	f.create(b, cms, `{"metadata":{"name":"u"},"data":{"k":"0"}}`)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if r := f.do(b, http.MethodPut, cms+"/u", "", fmt.Sprintf(`{"metadata":{"name":"u"},"data":{"k":"%d"}}`, i)); r.code != http.StatusOK {
			b.Fatalf("code %d: %s", r.code, r.body)
		}
	}
}

// BenchmarkDelete measures one ConfigMap delete through HTTP, the REST
// layer and etcd; the create before each is not timed.
func BenchmarkDelete(b *testing.B) {
	f := newWriteFixture(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		b.StopTimer()
		f.create(b, cms, fmt.Sprintf(`{"metadata":{"name":"d%d"},"data":{"k":"v"}}`, i))
		b.StartTimer()
		if r := f.do(b, http.MethodDelete, fmt.Sprintf("%s/d%d", cms, i), "", ""); r.code != http.StatusOK {
			b.Fatalf("code %d: %s", r.code, r.body)
		}
	}
}
