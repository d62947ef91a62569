"""The machine the node runs on: devices, process-wide allocator and OpenMP settings."""
