// Package cloudevent is the CloudEvents 1.0 NATS protocol binding as awaken speaks it on
// the wire: [EncodeMsg] writes binary content mode (the attributes as percent-encoded ce-*
// headers, the data as the JSON body), and [DecodeMsg] reads binary and structured mode
// (application/cloudevents+json), rejecting a malformed message with a typed
// [*contracts.Rejection] instead of guessing. It is public so platforms and tools that speak
// to awaken over NATS — and awaken's own client — share one codec; it interoperates with
// cloudevents/sdk-go (interop_test.go) and is fuzzed (fuzz_test.go).
package cloudevent
