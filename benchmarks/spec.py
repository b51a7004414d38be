"""Typed description of an operator and its shapes.

Frozen dataclasses only; no torch import at module level, so the scorer,
the CLI listing and the tests load without a GPU stack.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, Mapping, Sequence

DTYPES = ("bf16", "fp16", "fp32", "fp8", "tf32")
PHASES = ("prefill", "decode")
SHAPE_SETS = ("hot", "all", "prefill", "decode")


@dataclass(frozen=True)
class Tolerance:
    """Per-dtype acceptance bounds for a candidate's output.

    An element passes when |out - ref| <= atol + rtol * |ref|; the whole output
    must also keep ||out - ref|| / ||ref|| <= rel_l2. NaN/Inf never pass.
    An operator with `reference_with_scale` (OperatorSpec.reference_with_scale)
    also gives a per-element scale; the element bound is then
    atol + rtol * max(|ref|, scale), and rel_l2 is unchanged.
    """

    atol: float
    rtol: float
    rel_l2: float


@dataclass(frozen=True)
class Shape:
    """One benchmarked problem size of an operator.

    `weight` is the shape's share of serving GPU time over the operator's whole
    shape list (see benchmarks/weights.py); shape sets renormalize it.
    """

    id: str
    dims: tuple[tuple[str, int], ...]
    dtype: str
    phase: str
    source: str
    weight: float
    hot: bool = True

    @property
    def dim(self) -> dict[str, int]:
        return dict(self.dims)

    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.dims)

    @staticmethod
    def make(id: str, dims: Mapping[str, int], dtype: str = "bf16", phase: str = "decode",
             source: str = "", weight: float = 1.0, hot: bool = True) -> "Shape":
        if dtype not in DTYPES:
            raise ValueError(f"shape {id}: dtype {dtype!r} is not one of {DTYPES}")
        if phase not in PHASES:
            raise ValueError(f"shape {id}: phase {phase!r} is not one of {PHASES}")
        if weight < 0:
            raise ValueError(f"shape {id}: weight {weight} is negative; weights are GPU-time shares >= 0")
        return Shape(id=id, dims=tuple((str(k), int(v)) for k, v in dims.items()), dtype=dtype,
                     phase=phase, source=source, weight=float(weight), hot=bool(hot))


@dataclass(frozen=True)
class OperatorSpec:
    """Everything the benchmark core knows about one operator folder.

    The callables come from the folder's operator.py; see DESIGN.md section 3.
    """

    name: str
    signature: str                    # human-readable, e.g. "rms_norm(x[T,H], weight[H], eps=1e-6) -> [T,H]"
    arg_names: tuple[str, ...]        # the candidate function's parameters, in order
    description: str
    shapes: tuple[Shape, ...]
    seed_path: str
    module: ModuleType = field(repr=False, compare=False)

    # Thin accessors, so callers never reach into the module by string.
    @property
    def reference(self) -> Callable[..., Any]:
        return self.module.reference

    @property
    def reference_with_scale(self) -> Callable[..., Any] | None:
        """reference_with_scale(**inputs) -> (what reference returns, scale), or None when the operator has
        none. scale: per output element, the magnitude of what the reference adds up there (fused_moe: sum_j
        |w_j y_j|), a float tensor of the output's shape (a tuple, one entry or None per output, with
        OUTPUTS); the element bound becomes atol + rtol * max(|ref|, scale). The parent computes it from its
        own inputs: a sum's rounding error scales with its summands, not with a result they cancel to."""
        return getattr(self.module, "reference_with_scale", None)

    @property
    def make_inputs(self) -> Callable[..., dict]:
        """The operator's input maker, run with torch's default dtype pinned to float32: the parent and the
        worker must draw the same bytes from a seed (the input digests compare them), whatever default dtype
        earlier code in either process left behind (a test, a model loader, a candidate)."""
        return functools.partial(_with_float32_default, self.module.make_inputs)

    def work(self, shape: Shape) -> tuple[dict[str, float], float]:
        W, Q = self.module.work(shape.dim, shape.dtype)
        return dict(W), float(Q)

    def output_spec(self, dims: Mapping[str, int], dtype: str) -> tuple[tuple[int, ...], str]:
        """(shape, dtype) of a single-output operator's result; operators that declare OUTPUTS use `outputs`."""
        if self.output_names is not None:
            raise TypeError(f"operator {self.name} declares OUTPUTS={self.output_names}: use outputs(dims, dtype), "
                            f"which lists each output as (name, shape, dtype)")
        shape, out_dtype = self.module.output_spec(dict(dims), dtype)
        return tuple(int(s) for s in shape), out_dtype

    # ---- several outputs, in-place mutation, invariant checks (all optional in operator.py) -------------
    @property
    def output_names(self) -> tuple[str, ...] | None:
        """The declared OUTPUTS (the order the call returns them as a tuple), or None: one tensor, "out"."""
        names = getattr(self.module, "OUTPUTS", None)
        return None if names is None else tuple(str(n) for n in names)

    @property
    def mutates(self) -> tuple[str, ...]:
        """Arguments the call writes in place (MUTATES); the gate compares them whole after the call."""
        return tuple(str(n) for n in getattr(self.module, "MUTATES", ()))

    @property
    def check(self) -> Callable[..., str | None] | None:
        """check(inputs, outputs, reference_outputs) -> None | why: for results that are valid but not unique."""
        return getattr(self.module, "check", None)

    def outputs(self, dims: Mapping[str, int], dtype: str) -> list[tuple[str, tuple[int, ...], str]]:
        """(name, shape, dtype) of each returned output, in the order of the call's tuple. One entry named "out"
        for a single-output operator; none for an operator whose result is only its mutated arguments."""
        names = self.output_names
        if names is None:
            shape, out_dtype = self.output_spec(dims, dtype)
            return [("out", shape, out_dtype)]
        specs = tuple(self.module.output_spec(dict(dims), dtype))
        if len(specs) != len(names):
            raise ValueError(f"operator {self.name}: output_spec gave {len(specs)} (shape, dtype) pairs for "
                             f"OUTPUTS={names}; give one per output, in OUTPUTS order")
        return [(n, tuple(int(s) for s in shape), str(d)) for n, (shape, d) in zip(names, specs)]

    def tolerance(self, dtype: str) -> Tolerance:
        tol = self.module.TOLERANCES.get(dtype)
        if tol is None:
            raise KeyError(f"operator {self.name} has no tolerance for dtype {dtype!r}; "
                           f"known: {sorted(self.module.TOLERANCES)}")
        return tol

    def interpreter_dims(self, dims: Mapping[str, int]) -> dict[str, int]:
        """Dims scaled down for Triton's CPU interpreter (seconds, not minutes)."""
        return dict(self.module.interpreter_dims(dict(dims)))

    def holdout_dims(self, rng, at: Sequence[Shape] | None = None) -> list[dict[str, int]]:
        """Hidden shapes drawn fresh per evaluation: odd sizes, non-power-of-two token counts and one shape
        larger than the hot set, at the model sizes of the shapes `at` (default: every published shape of
        the operator). Never shown to a proposer."""
        pool = self.shapes if at is None else at
        return [dict(d) for d in self.module.holdout_dims(rng, [s.dim for s in pool])]

    def select(self, shape_set: str) -> tuple[Shape, ...]:
        return select_shapes(self.shapes, shape_set)


def select_shapes(shapes: tuple[Shape, ...] | list[Shape], shape_set: str) -> tuple[Shape, ...]:
    if shape_set == "all":
        return tuple(shapes)
    if shape_set == "hot":
        return tuple(s for s in shapes if s.hot)
    if shape_set in PHASES:
        return tuple(s for s in shapes if s.phase == shape_set)
    raise ValueError(f"unknown shape set {shape_set!r}; choose one of {', '.join(SHAPE_SETS)}")


def _with_float32_default(make_inputs: Callable[..., dict], *args, **kwargs) -> dict:
    import torch
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        return make_inputs(*args, **kwargs)
    finally:
        torch.set_default_dtype(old)
