// Package contracts is the vocabulary's base: it imports nothing of the module.
package contracts
