package x

type env struct {
	JS, Conn, Pub any
	Notice        func() any
}

type service struct{ env *env }

func (s *service) a() any { return s.env.Notice() }

func (s *service) b() any {
	// A field of the environment.
	return s.env.JS
}

func (s *service) c() any {
	return s.env.Conn
}

func (s *service) d() any {
	return s.env.Pub.JetStream().Conn()
}
