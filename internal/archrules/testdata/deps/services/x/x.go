package x

import "github.com/awaken-dev/awaken/internal/pipeline"

type Deps struct{ pipeline.Basics }

type service struct{ env *pipeline.Env }

// Start takes the whole environment.
func Start(env *pipeline.Env) *service { return &service{env: env} }

// DepsOf as a method is not the constructor of the dependencies.
func (s *service) DepsOf() *pipeline.Env { return s.env }

// DepsOf builds the dependencies: the one place that names the environment.
func DepsOf(env *pipeline.Env) Deps { return Deps{Basics: env.Basics()} }
