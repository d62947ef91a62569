"""Facts about the machine the node runs on: devices, and process-wide allocator settings."""
