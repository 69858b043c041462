package x

// Name is the gate, spelled again.
const Name = "gate"

// Other is not a service name.
const Other = "gates"
