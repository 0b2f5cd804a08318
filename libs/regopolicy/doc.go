// Package regopolicy is the engine of operators' Rego policies, shared by
// the services that let operators write them (authz's Rego mode, the
// admission service's Rego policies). A service says which packages its
// policies live in and which rules it reads of them; this package does the
// rest:
//
//   - Sources. Modules come from named sources, each replaced as a whole
//     when it changes (Engine.SetSource, the Sink that feeds take): a
//     directory of *.rego files (Dir: polled by Run, or checked once by
//     Sync) and the labelled ConfigMaps of one namespace (ConfigMaps, an
//     informer).
//   - Compiling once. Every change compiles all modules of all sources
//     together (Rego v1, rego.PrepareForEval) into a Set; evaluating a Set
//     takes the input only.
//   - The last good set. A change that does not compile, or puts a module
//     outside the service's packages, is logged and counted, and the set
//     in force stays; the broken modules are kept, so that the next change
//     of any source compiles them again.
//
// # Packages and rules
//
// Every module's package must be under the service's root package (for
// example kplane.authz.<name>), or, when the service allows it, the root
// itself. The service names its rules, each of one kind:
//
//   - Messages: a set of strings (deny contains msg if { ... }). The
//     result is every string of every package's set, sorted, without
//     duplicates; an element that is not a string is an evaluation error.
//   - Boolean: true or undefined (allow if { ... }). The result is the
//     packages in which it is true.
//
// Other rules are the modules' own helpers: a package of its own keeps a
// module's helpers from meeting another module's of the same name.
package regopolicy
