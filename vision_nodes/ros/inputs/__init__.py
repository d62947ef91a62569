"""Images in: subscription and QoS, message to array, cameras, batching, depth pairing."""
