"""Helpers the per-operator tests share: loading a seed file fresh, and the sandbox's tolerance check."""
import importlib.util

from sandbox.correctness import compare


def load_seed(path, name: str):
    """A fresh instance of a seed module (each test may rewrite its CONFIGS)."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tolerance_failures(out, ref, tol) -> list[str]:
    """Why `out` fails the tolerance, by the sandbox's own check (empty when it passes)."""
    stats = compare(out, ref, tol)
    return [] if stats.passed else [stats.describe(tol)]


def assert_within(out, ref, tol) -> float:
    """The contract's check (same shape and dtype, every element within atol + rtol*|ref|, rel_l2 within
    its limit, nothing non-finite); returns rel_l2."""
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype, ref.shape, ref.dtype)
    stats = compare(out, ref, tol)
    assert stats.passed, stats.describe(tol)
    return stats.rel_l2
