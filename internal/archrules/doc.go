// Package archrules holds the tests that keep the project's structure true: the
// vocabulary in pkg/contracts and each leaf package under it use only the standard
// library, so any outside producer can import it without pulling in the transport, and no
// service imports another, so each service builds, deploys and changes on its own. The
// module stands in layers, bottom up: the pkg vocabulary, the internal machinery (with
// pkg/executor, the public door to the executor's machinery), the services, the wiring
// (internal/wiring), and the public assemblies and commands (pkg/devserver,
// pkg/awakentest, cmd/); no non-test import runs from a lower layer to a higher one, so a
// service imports no wiring and, outside services/, only the wiring and cmd/ import service
// code: a shape two packages share lives in a public or internal package, never in a
// service. pkg/executor links no service, no wiring and no wazero, so a team writing one
// Go tool links the executor and nothing of the rest. Records move only through their
// transitions, service names are spelled once, fault hooks run only in their commit-point
// wrappers, and every consumer handler has the bus's one shape, behind the consumer's type
// filter as the only type check; the package map in docs/architecture.md names every
// package and no directory that is gone.
//
// The import rules are checked with go/build, the record writes by type-checking, the
// package map against the directories the module walk finds (moduleDirs), the others on
// the syntax of the module's non-test files (findInGoFiles); each rule is also run on a
// tree under testdata/ (for the map, on a written map and package list) that breaks it, so
// it cannot pass by checking nothing.
// Nothing here is linked into a binary.
package archrules
