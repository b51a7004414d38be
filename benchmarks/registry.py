"""Discovery of operator folders: benchmarks/operators/<name>/{operator.py, shapes.yaml, seed.py}.

Adding an operator touches only its folder; everything else finds it here.
"""
from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path

import yaml

from benchmarks.spec import OperatorSpec, Shape

OPERATORS_DIR = Path(__file__).resolve().parent / "operators"
REQUIRED_ATTRS = ("NAME", "SIGNATURE", "ARGS", "DESCRIPTION", "TOLERANCES", "make_inputs", "reference",
                  "output_spec", "work", "interpreter_dims", "holdout_dims", "occurrences")


class UnknownOperator(KeyError):
    def __init__(self, name: str, known: list[str]):
        super().__init__(name)
        self.name, self.known = name, known

    def __str__(self) -> str:
        return f"unknown operator {self.name!r}; known operators: {', '.join(self.known) or '(none)'}"


def list_operators() -> list[str]:
    return sorted(p.name for p in OPERATORS_DIR.iterdir()
                  if p.is_dir() and (p / "operator.py").is_file())


def contract_problems(module, path) -> None:
    """Raise on a module that breaks the operator contract: a required name missing, or the optional
    OUTPUTS / MUTATES / check / reference_with_scale declared inconsistently (benchmarks/operators/README.md)."""
    missing = [a for a in REQUIRED_ATTRS if not hasattr(module, a)]
    if missing:
        raise AttributeError(f"{path}: operator module lacks {', '.join(missing)} (contract: DESIGN.md section 3)")
    outputs = getattr(module, "OUTPUTS", None)
    mutates = tuple(getattr(module, "MUTATES", ()))
    if outputs is not None and (not isinstance(outputs, tuple) or len(set(outputs)) != len(outputs)):
        raise ValueError(f"{path}: OUTPUTS={outputs!r} must be a tuple of distinct output names")
    unknown = [m for m in mutates if m not in tuple(module.ARGS)]
    if unknown:
        raise ValueError(f"{path}: MUTATES names {unknown}, which are not in ARGS={tuple(module.ARGS)}")
    if outputs == () and not mutates:
        raise ValueError(f"{path}: OUTPUTS=() (the call returns None) needs MUTATES: the arguments that hold "
                         f"the result")
    if hasattr(module, "check") and not callable(module.check):
        raise ValueError(f"{path}: check must be a function check(inputs, outputs, reference_outputs)")
    if hasattr(module, "reference_with_scale") and not callable(module.reference_with_scale):
        raise ValueError(f"{path}: reference_with_scale must be a function of the inputs returning "
                         f"(reference's result, scale)")


def _load_module(name: str):
    path = OPERATORS_DIR / name / "operator.py"
    mod_name = f"benchmarks.operators.{name}.operator"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    contract_problems(module, path)
    if module.NAME != name:
        raise ValueError(f"{path}: NAME={module.NAME!r} must equal the folder name {name!r}")
    return module


def load_shapes(path: Path) -> tuple[Shape, ...]:
    data = yaml.safe_load(path.read_text()) or {}
    rows = data.get("shapes", [])
    return tuple(Shape.make(id=r["id"], dims=r["dims"], dtype=r.get("dtype", "bf16"),
                            phase=r["phase"], source=r.get("source", ""), weight=r.get("weight", 1.0),
                            hot=r.get("hot", True)) for r in rows)


@lru_cache(maxsize=None)
def load_operator(name: str) -> OperatorSpec:
    known = list_operators()
    if name not in known:
        raise UnknownOperator(name, known)
    module = _load_module(name)
    folder = OPERATORS_DIR / name
    shapes_path = folder / "shapes.yaml"
    shapes = load_shapes(shapes_path) if shapes_path.is_file() else ()
    return OperatorSpec(name=name, signature=module.SIGNATURE, arg_names=tuple(module.ARGS),
                        description=module.DESCRIPTION, shapes=shapes,
                        seed_path=str(folder / "seed.py"), module=module)
