"""stockr1: verifiable LLM reasoning about markets (shared types, data layer, CLI, pipeline)."""

__version__ = "0.1.0"
