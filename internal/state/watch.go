package state

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// Follow hands apply every entry w delivers until life ends or w closes, then stops w: a
// view of a bucket kept current by a watch. A watcher delivers the current values first,
// then a nil entry that marks their end (also when there are none); Follow calls caughtUp
// (when not nil) at that first marker, so a view can say when it holds what the bucket
// held at the start, and never hands apply a marker.
func Follow(life context.Context, w jetstream.KeyWatcher, caughtUp func(), apply func(jetstream.KeyValueEntry)) {
	defer func() { _ = w.Stop() }()
	initial := true
	for {
		select {
		case <-life.Done():
			return
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return
			case e != nil:
				apply(e)
			case initial:
				initial = false
				if caughtUp != nil {
					caughtUp()
				}
			}
		}
	}
}
