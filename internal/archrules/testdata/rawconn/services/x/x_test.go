package x

func peek(s *service) any { return s.env.JS }
