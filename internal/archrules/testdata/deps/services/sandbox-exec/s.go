package sandboxexec

import "github.com/awaken-dev/awaken/internal/pipeline"

func Start(env *pipeline.Env) {}
