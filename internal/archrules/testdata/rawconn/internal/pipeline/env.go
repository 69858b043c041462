package pipeline

type Env struct{ JS, Conn any }

func (e *Env) Notice() any { return e.Conn }
