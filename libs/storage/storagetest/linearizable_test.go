package storagetest

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// The model must reject the histories a broken store would produce, or the
// linearizability test could not fail.
func TestRegisterModel(t *testing.T) {
	op := func(client int, call, ret int64, in regInput, out regOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Call: call, Return: ret, Input: in, Output: out}
	}
	create := op(0, 0, 1, regInput{op: opCreate, key: "k", value: "init"}, regOutput{rv: 5})
	cases := []struct {
		name    string
		history []porcupine.Operation
		ok      bool
	}{
		{name: "sequential writes and reads", ok: true, history: []porcupine.Operation{
			create,
			op(1, 2, 3, regInput{op: opCAS, key: "k", value: "a", rv: 5}, regOutput{found: true, value: "a", rv: 6}),
			op(2, 4, 5, regInput{op: opCAS, key: "k", value: "b", rv: 5}, regOutput{conflict: true}),
			op(2, 6, 7, regInput{op: opWrite, key: "k", value: "c"}, regOutput{found: true, value: "c", rv: 9}),
			op(1, 8, 9, regInput{op: opRead, key: "k"}, regOutput{found: true, value: "c", rv: 9}),
		}},
		{name: "two compare-and-swaps from one revision both succeed", history: []porcupine.Operation{
			create,
			op(1, 2, 5, regInput{op: opCAS, key: "k", value: "a", rv: 5}, regOutput{found: true, value: "a", rv: 6}),
			op(2, 3, 6, regInput{op: opCAS, key: "k", value: "b", rv: 5}, regOutput{found: true, value: "b", rv: 7}),
		}},
		{name: "lost blind update", history: []porcupine.Operation{
			create,
			op(1, 2, 3, regInput{op: opWrite, key: "k", value: "a"}, regOutput{found: true, value: "a", rv: 6}),
			op(2, 4, 5, regInput{op: opWrite, key: "k", value: "b"}, regOutput{found: true, value: "b", rv: 7}),
			op(1, 6, 7, regInput{op: opRead, key: "k"}, regOutput{found: true, value: "a", rv: 6}),
		}},
		{name: "fresh compare-and-swap conflicts", history: []porcupine.Operation{
			create,
			op(1, 2, 3, regInput{op: opCAS, key: "k", value: "a", rv: 5}, regOutput{conflict: true}),
		}},
		{name: "stale read", history: []porcupine.Operation{
			create,
			op(1, 2, 3, regInput{op: opWrite, key: "k", value: "a"}, regOutput{found: true, value: "a", rv: 6}),
			op(2, 4, 5, regInput{op: opRead, key: "k"}, regOutput{found: true, value: "init", rv: 5}),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(registerModel, tc.history); got != tc.ok {
				t.Fatalf("linearizable = %v, want %v", got, tc.ok)
			}
		})
	}
}
