"""Measurement drivers: one-process studies run on a GPU box that write their results under --out."""
