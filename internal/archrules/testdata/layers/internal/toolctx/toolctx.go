// Package toolctx is the private half of the tool vocabulary, on its layer.
package toolctx
