"""Measurement drivers that study the agent (they may import every package of aka)."""
