package x

const inTest = "gate"
