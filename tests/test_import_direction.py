"""The import direction of DESIGN.md §2 holds for every file, lazy imports inside functions included:
benchmarks imports no other part of aka, sandbox imports no agent or knowledge, knowledge imports no agent,
sandbox or benchmarks."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "benchmarks", "knowledge", "sandbox")
FORBIDDEN = {
    "benchmarks": {"agent", "sandbox", "knowledge"},
    "sandbox": {"agent", "knowledge"},
    "knowledge": {"agent", "sandbox", "benchmarks"},
    "agent": set(),
}


def imported_packages(source: str) -> set[str]:
    """Top-level names of every module `source` imports: import statements anywhere in the file, and
    importlib.import_module / __import__ with a literal name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.add(node.args[0].value.split(".")[0])
    return found


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_follow_the_rule(package):
    files = _files(package)
    assert files, f"no Python files under {package}/"
    broken = []
    for path in files:
        bad = imported_packages(path.read_text()) & FORBIDDEN[package]
        if bad:
            broken.append(f"{path.relative_to(ROOT)} imports {', '.join(sorted(bad))}")
    assert not broken, (f"{package}/ may not import {sorted(FORBIDDEN[package])} (DESIGN.md §2); move the file "
                        f"beside the part it drives (e.g. agent/studies/, sandbox/studies/):\n" + "\n".join(broken))


def test_the_checker_sees_lazy_and_dynamic_imports():
    src = ("import os\n"
           "def f():\n    from agent.loop import run\n"
           "def g():\n    import importlib\n    importlib.import_module('knowledge.kb')\n"
           "from . import sibling\n")
    assert imported_packages(src) == {"os", "agent", "importlib", "knowledge"}
