// Package admissionreview is how a storage service hands a write to the
// admission service (kplane.dev/proto/admission): a rest admission plugin
// that asks once for the whole mutating phase and once for the whole
// validating phase of every write, applies the object the mutating steps
// leave, passes their warnings to the client, and refuses the write with
// their Status. When admission cannot be asked, the write fails closed
// with 503: nothing a policy would refuse is stored unasked.
package admissionreview
