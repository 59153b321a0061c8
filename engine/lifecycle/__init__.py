"""The memory lifecycle: importance, strength and decay, supersession, correction, erasure."""
