package beta

var X = 1
