// Package awakentest is an assembly; it imports nothing here.
package awakentest
