package x

import (
	"context"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
)

type service struct{ env *pipeline.Env }

func (s *service) handleA(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	return pipeline.Effects{}, nil
}
func (s *service) handleB(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	return pipeline.Effects{}, nil
}
func (s *service) plain(ctx context.Context, d bus.Delivery) error { return nil }

func adapt(f func() error) bus.Handler { return nil }

// control switches on the type the consumer's filter already checked.
func (s *service) control(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	switch d.Event.Type {
	case "a":
		return s.handleA(ctx, d)
	}
	if d.Event.Type == "b" || "c" != (d.Event.Type) {
		return s.handleB(ctx, d)
	}
	return pipeline.Effects{}, nil
}

// decoded asks whether the envelope decoded the way Delivery.EnvelopeDecoded answers.
func decoded(p *bus.Delivery) bool {
	var copied bus.Delivery
	made := bus.Delivery{}
	check := func() bool { return copied.Event.Type != "" && made.Event.Type == "" }
	return p.Event.Type != "" && check()
}

// fine reads the type, and compares the type of something that is not a delivery.
func fine(ctx context.Context, d bus.Delivery, stored struct{ Event struct{ Type string } }) string {
	if stored.Event.Type == "a" {
		return "stored"
	}
	return "type " + d.Event.Type
}

func start(ctx context.Context, s *service) {
	_, _ = bus.Start(ctx, nil, bus.DeliveryOptions{}, []bus.Route{
		{Handler: s.env.Handle("x", s.handleA)},
		{Handler: s.plain},
		{ByType: map[string]bus.Handler{"a": s.env.Handle("x", s.handleA), "b": (s.env.Handle("x", (s.handleB)))}},
		{ByType: map[string]bus.Handler{"a": s.plain}},
		{Handler: func(ctx context.Context, d bus.Delivery) error { return nil }},
		{ByType: map[string]bus.Handler{"a": adapt(nil), "b": s.env.Handle("x", s.handleB)}},
		{Handler: s.env.Handle("x", func(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) { return pipeline.Effects{}, nil })},
		{Handler: s.env.Handle("x", pick(s))},
	}, zero)
	route := bus.Route{Handler: adapt(nil)}
	_ = &bus.Route{ByType: map[string]bus.Handler{"c": func(context.Context, bus.Delivery) error { return nil }}}
	_, _ = bus.Consume(ctx, nil, bus.ConsumerSpec{}, s.plain, zero)
	_, _ = bus.Consume(ctx, nil, bus.ConsumerSpec{}, func(context.Context, bus.Delivery) error { return nil }, zero)
	_ = route
}

func pick(s *service) pipeline.EffectHandler { return s.handleA }
