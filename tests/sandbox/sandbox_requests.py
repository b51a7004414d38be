"""Test helper: an EvalRequest from flat keyword arguments (settings fields go into its SandboxSettings)."""
import dataclasses

from benchmarks.hardware import load_hardware
from sandbox.evaluation import EvalRequest
from sandbox.settings import SandboxSettings

SETTINGS_FIELDS = {f.name for f in dataclasses.fields(SandboxSettings)}


def make_request(op: str, source: str, shapes, **kw) -> EvalRequest:
    settings = SandboxSettings(**{k: kw.pop(k) for k in list(kw) if k in SETTINGS_FIELDS})
    return EvalRequest(op=op, source=source, shapes=tuple(shapes), hardware=load_hardware("h200"),
                       settings=settings, **kw)
