"""The audit of python: the syntax tree, what its names refer to, and the rules over them."""
