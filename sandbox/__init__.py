"""The only package that runs candidate code. See DESIGN.md sections 1 and 4.

`evaluate(EvalRequest(...)) -> EvalResult`: lint, compile, correctness (with hidden hold-out shapes),
DSL share and timing, each candidate in a spawned, isolated worker. `Sandbox(settings)` keeps a run's
pre-started workers and compile cache between evaluations (sandbox/session.py).
"""
from sandbox.evaluation import EvalRequest, evaluate
from sandbox.session import Sandbox
from sandbox.settings import SandboxSettings

__all__ = ["EvalRequest", "Sandbox", "SandboxSettings", "evaluate"]
