package watchshare

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"

	"kplane.dev/libs/apiserver/kubeproto"
)

// BenchmarkDeliver hands one event of a ConfigMap to 200 watchers and
// waits until each has it: the hub's cost per event without the writes
// to clients, which a stream pays once for all its watchers.
func BenchmarkDeliver(b *testing.B) {
	const watchers = 200
	s := testStream(b, Limits{History: 1000, Buffer: 1000}, false)
	got := make(chan struct{}, watchers)
	var wg sync.WaitGroup
	for range watchers {
		w := s.add(request{from: 10}, 1000)
		wg.Go(func() {
			for range w.events {
				got <- struct{}{}
			}
		})
	}
	frame, h := change("MODIFIED", "a", "11")
	b.ReportAllocs()
	for b.Loop() {
		s.deliver(frame, h)
		for range watchers {
			<-got
		}
	}
	s.end()
	wg.Wait()
}

// BenchmarkRead reads one event of a 1 KiB ConfigMap, in each encoding.
func BenchmarkRead(b *testing.B) {
	cm := configMap("a", "42")
	cm.Data["k"] = string(bytes.Repeat([]byte("x"), 1024))
	jsonObj, err := json.Marshal(cm)
	if err != nil {
		b.Fatal(err)
	}
	protoObj, err := kubeproto.Encode(cm)
	if err != nil {
		b.Fatal(err)
	}
	protoFrame, err := kubeproto.EventFrame("MODIFIED", protoObj)
	if err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct {
		mediaType string
		frame     []byte
	}{
		{"application/json", []byte(`{"type":"MODIFIED","object":` + string(jsonObj) + "}\n")},
		{kubeproto.StreamMediaType, protoFrame},
	} {
		b.Run(tt.mediaType, func(b *testing.B) {
			stream := bytes.Repeat(tt.frame, 1000)
			b.SetBytes(int64(len(tt.frame)))
			b.ReportAllocs()
			var c codec
			for i := 0; b.Loop(); i++ {
				if i%1000 == 0 {
					c = mustCodec(b, tt.mediaType, stream)
				}
				if _, _, err := c.read(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
