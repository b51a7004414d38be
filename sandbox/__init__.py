"""The only package that runs candidate code. See DESIGN.md sections 1 and 4.

`evaluate(EvalRequest(...)) -> EvalResult`: lint, compile, correctness (with hidden hold-out shapes),
DSL share and timing, each candidate in a spawned, isolated worker.
"""
from sandbox.evaluation import EvalRequest, evaluate

__all__ = ["EvalRequest", "evaluate"]
