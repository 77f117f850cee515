"""postflightd: the postflight of AI coding agents, done once and correctly."""

__version__ = "0.1.0"
