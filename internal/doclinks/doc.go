// Package doclinks holds the test that keeps the documentation's relative links true:
// every link of README.md and docs/*.md to a file of the repository names one that
// exists and, with a #fragment, a heading of it (by GitHub's anchor rules).
package doclinks
