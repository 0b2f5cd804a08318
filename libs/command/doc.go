// Package command runs a kplane service binary: flags into Options, a
// validated Config, a server built from it, and Run until SIGINT or
// SIGTERM. Every service's main is the same few lines around Run.
package command
