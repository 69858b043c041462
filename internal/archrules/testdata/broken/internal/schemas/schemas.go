// Package schemas is the schema generator's place; its own file keeps the rules.
package schemas
