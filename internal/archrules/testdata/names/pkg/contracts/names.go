package contracts

const ServiceGate = "gate"
