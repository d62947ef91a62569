"""Hand-written CDR: one reader (images in), one writer and the encoders (messages out)."""
