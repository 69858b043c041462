package bus

import "context"

type Delivery struct{ Event struct{ Type, ID string } }

type Route struct {
	Handler func(context.Context, Delivery) error
}

// EnvelopeDecoded is the bus's own: it may look at the type.
func (d Delivery) EnvelopeDecoded() bool { return d.Event.Type != "" || d.Event.ID != "" }

func start(d Delivery) {
	_ = Route{Handler: func(context.Context, Delivery) error { return nil }}
	switch d.Event.Type {
	}
}
