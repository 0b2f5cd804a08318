package server

import (
	"bytes"
	"io"
	"testing"
)

// TestWholeBodyReadRest: what ReadRest returns is what reading the body
// to its end would, and reading it afterwards finds nothing left.
func TestWholeBodyReadRest(t *testing.T) {
	data := []byte(`{"metadata":{"name":"a"}}`)
	b := &wholeBody{Reader: bytes.NewReader(data), data: data}
	head := make([]byte, 5)
	if _, err := io.ReadFull(b, head); err != nil {
		t.Fatal(err)
	}
	if got := string(b.ReadRest()); got != string(data[5:]) {
		t.Fatalf("ReadRest after 5 bytes = %q, want %q", got, data[5:])
	}
	if n, err := b.Read(head); n != 0 || err != io.EOF {
		t.Fatalf("read after ReadRest: %d bytes, %v; want 0, EOF", n, err)
	}
	if got := b.ReadRest(); len(got) != 0 {
		t.Fatalf("ReadRest again = %q, want nothing", got)
	}
}
