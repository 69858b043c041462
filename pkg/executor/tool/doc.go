// Package tool is the vocabulary of a Brain tool author: the typed [Tool] and [ToolFunc],
// the [Reconciler] a tool may implement, and what a body learns about the call it runs for
// ([Invocation], [InvocationFrom], [OperationID], [IdempotencyKey]) or tells the executor
// ([ReportProgress], [ReportCost]). It is the one definition of these names: pkg/executor re-exports
// them (type aliases, and one-line functions for the generic constructors, which Go cannot
// alias), the stock brain-exec service and its builtin tools use them directly, and the
// executor core (internal/execcore) aliases [Invocation].
//
// Why a package of its own rather than pkg/executor itself: pkg/executor runs the Brain
// executor of internal/brainexec, which needs these types, so defining them in
// pkg/executor would make the executor import the package that imports it. This package is a leaf instead — it imports only the standard library,
// pkg/contracts and internal/toolctx (the context hooks only the executor core installs)
// — so every side imports it and nothing imports back.
//
// Tool authors normally write executor.Tool, executor.ToolFunc and so on; importing this
// package directly is for code that must not depend on the executor runtime.
package tool
