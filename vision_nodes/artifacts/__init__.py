"""Exported artifacts: the content-addressed engine cache and the conversion chain."""
