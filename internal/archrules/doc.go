// Package importrules holds the test that keeps the project's structure true: the
// vocabulary in pkg/contracts and each leaf package under it use only the standard
// library, so any outside producer can import it without pulling in the transport, and no
// service imports another, so each service builds, deploys and changes on its own. The
// rules are checked by parsing import declarations with go/build; nothing here is linked
// into a binary.
package archrules
