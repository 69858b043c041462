package x

import (
	"context"

	"github.com/awaken-dev/awaken/internal/bus"
)

func testHandler(ctx context.Context, d bus.Delivery) error {
	_ = bus.Route{Handler: func(context.Context, bus.Delivery) error { return nil }}
	switch d.Event.Type {
	}
	return nil
}
