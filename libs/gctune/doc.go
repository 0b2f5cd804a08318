// Package gctune lets a service's heap grow by a fixed amount over what is
// live before the garbage collector runs, where Go's default (GOGC=100)
// would run it as soon as the heap has doubled.
//
// kplane's services keep small heaps (the gateway's live heap is about
// 10 MB, crd's 20-30 MB with a thousand custom resources) and allocate
// some hundred kilobytes per request, so with the default they collect
// several times a second and spend a fifth of their CPU marking and
// allocating (profiles in issue 14). A heap that may grow by a fixed
// headroom instead costs a bounded amount of memory, the headroom, and
// collects as often as a heap that size would. A heap whose live part is
// larger than the headroom is left to GOGC=100: there the default already
// gives more room.
//
// The GOGC and GOMEMLIMIT environment variables keep their meaning: with
// GOGC set the tuner does nothing, and a GOMEMLIMIT still bounds the heap.
package gctune
