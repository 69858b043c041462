// Package kit imports the bus under another name.
package kit

import (
	"context"

	b "github.com/awaken-dev/awaken/internal/bus"
)

func handle(ctx context.Context, d b.Delivery) error {
	if d.Event.Type != "" {
		return nil
	}
	_ = []*b.Route{{Handler: func(context.Context, b.Delivery) error { return nil }}}
	return nil
}
