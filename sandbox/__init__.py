"""The only package that runs candidate code. See DESIGN.md sections 1 and 4."""
