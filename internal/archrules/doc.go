// Package importrules holds the test that keeps the project's structure true: the
// vocabulary in pkg/contracts and each leaf package under it use only the standard
// library, so any outside producer can import it without pulling in the transport, and no
// service imports another, so each service builds, deploys and changes on its own. Outside
// services/, only the wiring that runs them (cmd/, internal/app, internal/cli,
// internal/devstack) imports their code, so a shape two packages share lives in a public or
// internal package, never in a service. The
// rules are checked by parsing import declarations with go/build; nothing here is linked
// into a binary.
package archrules
