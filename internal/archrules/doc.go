// Package archrules holds the tests that keep the project's structure true: the
// vocabulary in pkg/contracts and each leaf package under it use only the standard
// library, so any outside producer can import it without pulling in the transport, and no
// service imports another, so each service builds, deploys and changes on its own. Outside
// services/, only the wiring that runs them (cmd/, internal/app, internal/cli,
// internal/devstack) imports their code, so a shape two packages share lives in a public or
// internal package, never in a service. Records move only through their transitions,
// service names are spelled once, fault hooks run only in their commit-point wrappers, and
// every consumer handler has the bus's one shape, behind the consumer's type filter as the
// only type check; the package map in docs/architecture.md names every package and no
// directory that is gone.
//
// The import rules are checked with go/build, the record writes by type-checking, the
// package map against the directories the module walk finds (moduleDirs), the others on
// the syntax of the module's non-test files (findInGoFiles); each rule is also run on a
// tree under testdata/ (for the map, on a written map and package list) that breaks it, so
// it cannot pass by checking nothing.
// Nothing here is linked into a binary.
package archrules
