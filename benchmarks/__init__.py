"""The benchmark core: what to measure and how to score it. Imports no other aka package."""
