// Package httpapi is the wire shape of docs/http-api.md: the request and reply bodies of
// the api's HTTP routes (under /v1) and of its NATS micro service, the error body and
// codes both doors refuse with, the micro endpoints' names and subjects, and the roles a
// token carries. The api (services/api) encodes and decodes exactly these types, the JSON
// Schemas of schemas/api_*.json are derived from them (internal/schemas), and a Go caller
// of either door decodes its answers into them without linking the service.
//
// It imports only pkg/contracts and the standard library, so using it costs a caller
// nothing more than the protocol's vocabulary.
package httpapi
