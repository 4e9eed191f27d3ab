package hns

// BigNode is bigNode for the external tests: one node at the issue's
// scale, have differing from want in the routes and endpoints given.
var BigNode = bigNode
