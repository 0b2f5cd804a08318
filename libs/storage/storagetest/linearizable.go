package storagetest

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/storage"
)

// The linearizability test writes a few keys from many goroutines and
// checks the recorded history against a register per key.
const (
	linClients    = 12
	linOpsPerCall = 30
	linKeys       = 3
)

type opKind int

const (
	opCreate opKind = iota
	opRead
	// opWrite is a guaranteed update without a resourceVersion (a patch).
	opWrite
	// opCAS is an update carrying the resourceVersion its client last saw
	// (a PUT): it must conflict unless that is still the key's.
	opCAS
)

func (k opKind) String() string {
	return [...]string{"create", "read", "write", "cas"}[k]
}

type regInput struct {
	op    opKind
	key   string
	value string
	rv    int64 // the expected resourceVersion of opCAS
}

type regOutput struct {
	found    bool
	conflict bool
	value    string
	rv       int64
}

type regState struct {
	exists bool
	value  string
	rv     int64
}

// PartitionBy splits a history into one history per key, in the order
// keys first appear: registers of different keys are independent, and
// porcupine checks small histories much faster than one large one.
func PartitionBy(key func(input any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := key(op.Input)
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	}
}

// registerModel is the sequential specification: one register per key
// holding a value and the resourceVersion of its last write. Revisions are
// etcd's, so a write's only promise is to move past the one it replaced.
var registerModel = porcupine.Model{
	Partition: PartitionBy(func(in any) string { return in.(regInput).key }),
	Init:      func() any { return regState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(regState), input.(regInput), output.(regOutput)
		written := regState{exists: true, value: in.value, rv: out.rv}
		switch in.op {
		case opCreate:
			return !s.exists && !out.conflict, written
		case opRead:
			if !out.found {
				return !s.exists, s
			}
			return s.exists && s.value == out.value && s.rv == out.rv, s
		case opWrite:
			return s.exists && out.rv > s.rv, written
		case opCAS:
			if out.conflict {
				return s.rv != in.rv, s
			}
			return s.exists && s.rv == in.rv && out.rv > s.rv, written
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		return fmt.Sprintf("%s(%s, %q, rv %d) -> %+v", in.op, in.key, in.value, in.rv, out)
	},
}

// testLinearizable runs reads, blind updates and compare-and-swap updates
// with fresh and stale resourceVersions concurrently; a lost update or a
// read of a state that never was makes the history illegal.
func testLinearizable(e *env) {
	seed := time.Now().UnixNano()
	e.t.Logf("seed %d", seed)
	base := time.Now()
	clock := func() int64 { return int64(time.Since(base)) }

	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(client int, in regInput, call int64, out regOutput) {
		ret := clock()
		mu.Lock()
		defer mu.Unlock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	}

	keys := make([]string, linKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
		in := regInput{op: opCreate, key: keys[i], value: "init"}
		call := clock()
		created := e.create("ns", keys[i], nil, "init")
		record(linClients, in, call, regOutput{rv: rvOf(e.t, created)})
	}

	var wg sync.WaitGroup
	for c := range linClients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(c)))
			seen := map[string]int64{}
			for i := range linOpsPerCall {
				k := keys[rng.IntN(len(keys))]
				in := regInput{key: k, value: fmt.Sprintf("c%d-%d", c, i)}
				switch n := rng.IntN(10); {
				case n < 4:
					in.op = opRead
				case n < 6:
					in.op = opWrite
				default:
					in.op = opCAS
					in.rv = seen[k]
					if rng.IntN(3) == 0 {
						// Older than anything the key can hold now.
						in.rv--
					}
				}
				call := clock()
				out, err := e.linOp(in)
				if err != nil {
					e.t.Errorf("client %d: %s %s: %v", c, in.op, k, err)
					return
				}
				record(c, in, call, out)
				if out.rv != 0 {
					seen[k] = out.rv
				}
			}
		})
	}
	wg.Wait()
	if e.t.Failed() {
		return
	}
	// A final read of every key pins the outcome: a lost update shows here
	// even if no concurrent read caught it.
	for _, k := range keys {
		in := regInput{op: opRead, key: k}
		call := clock()
		out, err := e.linOp(in)
		if err != nil {
			e.t.Fatalf("final read of %s: %v", k, err)
		}
		record(linClients, in, call, out)
	}

	res, info := porcupine.CheckOperationsVerbose(registerModel, history, 60*time.Second)
	if res != porcupine.Ok {
		e.t.Errorf("history of %d operations is %s, not linearizable", len(history), res)
		for _, part := range info.PartialLinearizations() {
			e.t.Logf("longest linearizable prefix: %d operations", len(part[0]))
		}
	}
}

// linOp performs one operation of the linearizability test on the store.
func (e *env) linOp(in regInput) (regOutput, error) {
	key := e.key("ns", in.key)
	switch in.op {
	case opRead:
		obj, err := e.f.Store.Get(e.ctx, key, storage.GetOptions{})
		if storage.IsNotFound(err) {
			return regOutput{}, nil
		}
		if err != nil {
			return regOutput{}, err
		}
		return observed(obj)
	case opWrite, opCAS:
		obj, err := e.f.Store.GuaranteedUpdate(e.ctx, key, nil, func(existing runtime.Object) (runtime.Object, error) {
			m, err := meta.Accessor(existing)
			if err != nil {
				return nil, err
			}
			if in.op == opCAS && m.GetResourceVersion() != fmt.Sprint(in.rv) {
				return nil, conflict(key, fmt.Sprint(in.rv), m.GetResourceVersion())
			}
			m.SetAnnotations(map[string]string{valueKey: in.value})
			return existing, nil
		})
		if in.op == opCAS && storage.IsConflict(err) {
			return regOutput{conflict: true}, nil
		}
		if err != nil {
			return regOutput{}, err
		}
		return observed(obj)
	}
	return regOutput{}, fmt.Errorf("unknown operation %s", in.op)
}

// observed is what an operation saw of obj. It runs on the clients'
// goroutines, so it reports problems instead of failing the test.
func observed(obj runtime.Object) (regOutput, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return regOutput{}, fmt.Errorf("read metadata: %w", err)
	}
	rv, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil {
		return regOutput{}, fmt.Errorf("resourceVersion %q is not a revision", m.GetResourceVersion())
	}
	return regOutput{found: true, value: m.GetAnnotations()[valueKey], rv: rv}, nil
}
