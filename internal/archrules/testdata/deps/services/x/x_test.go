package x

import "github.com/awaken-dev/awaken/internal/pipeline"

func testEnv() *pipeline.Env { return nil }
