"""The node's parameters: their specs, the policy that applies them, QoS overrides."""
