// A platform's agent on the openai adapter: a module of its own, like any platform's.
module example.com/openai-agent

go 1.26.0

require (
	github.com/awaken-dev/awaken v0.0.0-00010101000000-000000000000
	github.com/awaken-dev/awaken/adapters/openai v0.0.0-00010101000000-000000000000
	github.com/openai/openai-go/v3 v3.100.0
)

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/nats-io/nats.go v1.55.0 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/rs/zerolog v1.35.1 // indirect
	github.com/synadia-io/orbit.go/jetstreamext v0.3.2 // indirect
	github.com/synadia-io/orbit.go/natsext v0.1.3 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace (
	github.com/awaken-dev/awaken => ../..
	github.com/awaken-dev/awaken/adapters/openai => ../../adapters/openai
)
