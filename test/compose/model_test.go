//go:build compose

package compose

import (
	"fmt"

	"github.com/anishathalye/porcupine"

	"kplane.dev/libs/storage/storagetest"
)

// opKind is what one operation of the history does to one ConfigMap.
type opKind int

const (
	opRead opKind = iota
	// opWrite is an update without a resourceVersion: a blind write.
	opWrite
	// opCAS is an update carrying the resourceVersion its client last
	// read, fresh or stale: it must conflict unless that is still the
	// object's.
	opCAS
)

func (k opKind) String() string { return [...]string{"read", "write", "cas"}[k] }

type regInput struct {
	op    opKind
	key   string
	value string
	rv    int64
}

type regOutput struct {
	conflict bool
	// unknown: the request failed without saying whether it was applied
	// (the connection broke, a 5xx): it may take effect at any time after
	// its call, or never.
	unknown bool
	value   string
	rv      int64
}

type regState struct {
	value string
	// rv is the resourceVersion of the last write, or unknownRV after a
	// write whose outcome was not seen.
	rv int64
}

const unknownRV = -1

// registerModel is each ConfigMap as a register holding a value and the
// resourceVersion of its last write. A write only promises to move past
// the resourceVersion it replaced: they are etcd's revisions.
var registerModel = porcupine.NondeterministicModel{
	Partition: storagetest.PartitionBy(func(in any) string { return in.(regInput).key }),
	Init:      func() []any { return []any{regState{value: "init", rv: unknownRV}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		rvMatches := func(rv int64) bool { return s.rv == unknownRV || s.rv == rv }
		if out.unknown {
			// Not applied, or applied with a resourceVersion nobody saw.
			states := []any{s}
			if in.op == opWrite || in.op == opCAS && rvMatches(in.rv) {
				states = append(states, regState{value: in.value, rv: unknownRV})
			}
			return states
		}
		switch in.op {
		case opRead:
			if s.value == out.value && rvMatches(out.rv) {
				return []any{regState{value: s.value, rv: out.rv}}
			}
		case opWrite:
			if s.rv == unknownRV || out.rv > s.rv {
				return []any{regState{value: in.value, rv: out.rv}}
			}
		case opCAS:
			if out.conflict {
				if s.rv != in.rv {
					return []any{s}
				}
				return nil
			}
			if rvMatches(in.rv) && (s.rv == unknownRV || out.rv > s.rv) {
				return []any{regState{value: in.value, rv: out.rv}}
			}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		return fmt.Sprintf("%s(%s, %q, rv %d) -> %+v", in.op, in.key, in.value, in.rv, out)
	},
}
