package contracts

import "errors"

// ToolErrorKind classifies a [ToolError]. The kind, not the message, is
// what code may branch on.
type ToolErrorKind string

const (
	// ToolErrorUnknown: no executable is registered under the tool id.
	ToolErrorUnknown ToolErrorKind = "unknown"
	// ToolErrorInvalidArguments: the arguments do not match the tool's parameters.
	ToolErrorInvalidArguments ToolErrorKind = "invalid_arguments"
	// ToolErrorUnavailableBeforeDispatch: the executor proved the request never crossed
	// its dispatch boundary, so the call may be retried without replaying an effect.
	ToolErrorUnavailableBeforeDispatch ToolErrorKind = "unavailable_before_dispatch"
	// ToolErrorExecution: a local configuration rejection or any failure after dispatch.
	// It proves nothing about the effect, so it never licenses a retry by itself.
	ToolErrorExecution ToolErrorKind = "execution"
)

// ToolError is the typed failure of a tool invocation. At the execute confluence every
// error becomes a model-visible error output (see [ToolError.Output] and
// [ErrorToOutput]); the run continues. Match it with errors.As.
type ToolError struct {
	Kind ToolErrorKind
	Msg  string
}

// ErrUnknownTool reports that no executable is registered for toolID.
func ErrUnknownTool(toolID string) *ToolError {
	return &ToolError{Kind: ToolErrorUnknown, Msg: toolID}
}

// InvalidArguments reports arguments that do not fit the tool; msg should name the field.
func InvalidArguments(msg string) *ToolError {
	return &ToolError{Kind: ToolErrorInvalidArguments, Msg: msg}
}

// UnavailableBeforeDispatch reports an executor that is provably unreachable before the
// request was handed over. Return it only with that proof: a lost reply after the peer read
// the request is an [ExecutionFailed], because the effect may have happened.
func UnavailableBeforeDispatch(msg string) *ToolError {
	return &ToolError{Kind: ToolErrorUnavailableBeforeDispatch, Msg: msg}
}

// ExecutionFailed reports a failure during or after dispatch, or a local rejection.
func ExecutionFailed(msg string) *ToolError {
	return &ToolError{Kind: ToolErrorExecution, Msg: msg}
}

// Error renders the error exactly as the original runtime does, since this text is what
// the model reads: "unknown tool: …", "invalid tool arguments: …", "tool executor
// unavailable before dispatch: …" or "tool execution failed: …". An unrecognised kind
// renders as an execution failure, the variant that claims nothing about the effect.
func (e *ToolError) Error() string {
	switch e.Kind {
	case ToolErrorUnknown:
		return "unknown tool: " + e.Msg
	case ToolErrorInvalidArguments:
		return "invalid tool arguments: " + e.Msg
	case ToolErrorUnavailableBeforeDispatch:
		return "tool executor unavailable before dispatch: " + e.Msg
	default:
		return "tool execution failed: " + e.Msg
	}
}

// Output returns the model-visible error output of e for callID, with e.Error() as text.
func (e *ToolError) Output(callID string) ToolOutput {
	return ErrorOutput(callID, e.Error())
}

// ErrorToOutput turns any error returned by a tool into its model-visible error output: a
// [*ToolError] anywhere in err's chain renders as itself, any other error as an execution
// failure carrying err's text; a nil err is still an error output, never a success. This is the single point where a tool failure becomes an output.
func ErrorToOutput(callID string, err error) ToolOutput {
	if err == nil {
		return ExecutionFailed("the tool reported a failure without an error").Output(callID)
	}
	var te *ToolError
	if errors.As(err, &te) {
		return te.Output(callID)
	}
	return ExecutionFailed(err.Error()).Output(callID)
}

// IsUnavailableBeforeDispatch reports whether err's chain holds a [*ToolError] of kind
// [ToolErrorUnavailableBeforeDispatch], the only error that proves the effect did not
// start and so lets a call be retried without counting as a replay.
func IsUnavailableBeforeDispatch(err error) bool {
	var te *ToolError
	return errors.As(err, &te) && te.Kind == ToolErrorUnavailableBeforeDispatch
}
