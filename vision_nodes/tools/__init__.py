"""Tools built on the node: the demo, and a client to drive a node from Python."""
