"""How the node runs: start-up, executor, transitions, launch, topics, logs, diagnostics."""
