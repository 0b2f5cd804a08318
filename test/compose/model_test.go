package compose

import (
	"fmt"
	"math"
	"testing"

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
			if moves(s, in, out) {
				return []any{regState{value: in.value, rv: out.rv}}
			}
		case opCAS:
			if out.conflict {
				if s.rv != in.rv {
					return []any{s}
				}
				return nil
			}
			if rvMatches(in.rv) && moves(s, in, out) {
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

// moves reports whether a successful write from s is possible: it moves
// past the resourceVersion it replaced, or, writing the value already
// there, changes nothing and keeps it, as kube does with an update that
// changes nothing (a retry of a write that took effect).
func moves(s regState, in regInput, out regOutput) bool {
	return s.rv == unknownRV || out.rv > s.rv || out.rv == s.rv && s.value == in.value
}

func TestRegisterModel(t *testing.T) {
	op := func(client int, call, ret int64, in regInput, out regOutput) porcupine.Operation {
		if out.unknown {
			ret = math.MaxInt64
		}
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
	}
	for _, tc := range []struct {
		name    string
		ok      bool
		history []porcupine.Operation
	}{
		{name: "sequential writes and reads", ok: true, history: []porcupine.Operation{
			op(0, 0, 1, regInput{op: opRead, key: "k"}, regOutput{value: "init", rv: 5}),
			op(0, 2, 3, regInput{op: opWrite, key: "k", value: "a"}, regOutput{value: "a", rv: 7}),
			op(1, 4, 5, regInput{op: opCAS, key: "k", value: "b", rv: 5}, regOutput{conflict: true}),
			op(1, 6, 7, regInput{op: opCAS, key: "k", value: "b", rv: 7}, regOutput{value: "b", rv: 9}),
			op(0, 8, 9, regInput{op: opRead, key: "k"}, regOutput{value: "b", rv: 9}),
		}},
		{name: "a retried write that had taken effect changes nothing", ok: true, history: []porcupine.Operation{
			op(0, 0, 0, regInput{op: opWrite, key: "k", value: "a"}, regOutput{unknown: true}),
			op(1, 1, 2, regInput{op: opRead, key: "k"}, regOutput{value: "a", rv: 7}),
			op(0, 3, 4, regInput{op: opWrite, key: "k", value: "a"}, regOutput{value: "a", rv: 7}),
		}},
		{name: "a write that keeps the resourceVersion of another value", history: []porcupine.Operation{
			op(1, 1, 2, regInput{op: opWrite, key: "k", value: "a"}, regOutput{value: "a", rv: 7}),
			op(0, 3, 4, regInput{op: opWrite, key: "k", value: "b"}, regOutput{value: "b", rv: 7}),
		}},
		{name: "an unknown write may never happen", ok: true, history: []porcupine.Operation{
			op(0, 0, 0, regInput{op: opWrite, key: "k", value: "a"}, regOutput{unknown: true}),
			op(1, 1, 2, regInput{op: opRead, key: "k"}, regOutput{value: "init", rv: 5}),
		}},
		{name: "stale read", history: []porcupine.Operation{
			op(0, 0, 1, regInput{op: opWrite, key: "k", value: "a"}, regOutput{value: "a", rv: 7}),
			op(1, 2, 3, regInput{op: opRead, key: "k"}, regOutput{value: "init", rv: 5}),
		}},
		{name: "two compare-and-swaps from one resourceVersion both succeed", history: []porcupine.Operation{
			op(0, 0, 1, regInput{op: opRead, key: "k"}, regOutput{value: "init", rv: 5}),
			op(0, 2, 5, regInput{op: opCAS, key: "k", value: "a", rv: 5}, regOutput{value: "a", rv: 7}),
			op(1, 3, 6, regInput{op: opCAS, key: "k", value: "b", rv: 5}, regOutput{value: "b", rv: 8}),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(registerModel.ToModel(), tc.history); got != tc.ok {
				t.Errorf("linearizable = %v, want %v", got, tc.ok)
			}
		})
	}
}
