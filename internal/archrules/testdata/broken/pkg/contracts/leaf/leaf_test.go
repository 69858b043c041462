package leaf

// A test file of a leaf may import what it needs: the rule is about what the leaf links.
import _ "pgregory.net/rapid"
