"""The lint's rule for programmatic dependent launch (PDL, `kernel[grid](..., launch_pdl=...)`, Hopper and later).

A kernel launched with launch_pdl may start while the kernel before it in the stream is still running, so it
must wait (`tl.extra.cuda.gdc_wait()`) before it reads anything: that earlier kernel may be the one writing
its inputs. The harness cannot see a kernel that skips the wait: the kernel before a timed call is the L2
flush, which writes none of the inputs, so such a kernel reads correct inputs here, is timed faster, and reads
half-written ones in a serving engine. Hence a static rule, narrow enough to check exactly:
- launch_pdl is a keyword of a direct `kernel[grid](...)` launch of one of the file's kernels, nowhere else
  (not in a functools.partial, a helper's parameters or a `**options` dict, and not the string "launch_pdl");
- unless its value is the literal False (or 0 / None), the kernel's first statement (after a docstring) is
  `tl.extra.cuda.gdc_wait()`, or an `if GATE:` (no else) whose first statement it is, where GATE is one of the
  kernel's constexpr parameters and the launch passes GATE the same expression as launch_pdl (the interpreter
  has no griddepcontrol, so a kernel that also runs on the CPU gates the wait on the same value as the launch).
"""
from __future__ import annotations

import ast
from typing import Callable

WAIT = "triton.language.extra.cuda.gdc_wait"
KEYWORD = "launch_pdl"
FIX = (f"make the kernel's first statement tl.extra.cuda.gdc_wait() (or `if USE_PDL: tl.extra.cuda.gdc_wait()` with "
       f"USE_PDL: tl.constexpr passed the same value as {KEYWORD}), so it reads nothing the kernel before it in the "
       f"stream may still be writing")


def _off(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and value.value in (False, 0, None)


def _body(fn: ast.FunctionDef) -> list[ast.stmt]:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return body


def _is_wait(stmt: ast.stmt, path: Callable[[ast.expr], str | None]) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and not stmt.value.args \
        and not stmt.value.keywords and path(stmt.value.func) == WAIT


def _constexpr_params(fn: ast.FunctionDef, path: Callable[[ast.expr], str | None]) -> set[str]:
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    return {a.arg for a in args if a.annotation is not None and path(a.annotation) == "triton.language.constexpr"}


def _waits_first(fn: ast.FunctionDef, launch: ast.Call, value: ast.expr,
                 path: Callable[[ast.expr], str | None]) -> bool:
    body = _body(fn)
    if not body:
        return False
    first = body[0]
    if _is_wait(first, path):
        return True
    if not (isinstance(first, ast.If) and isinstance(first.test, ast.Name) and not first.orelse
            and _is_wait(first.body[0], path)):
        return False
    gate = first.test.id
    passed = [k.value for k in launch.keywords if k.arg == gate]
    return gate in _constexpr_params(fn, path) and len(passed) == 1 and ast.dump(passed[0]) == ast.dump(value)


def pdl_issues(tree: ast.Module, kernels: dict[str, ast.FunctionDef], parents: dict[int, ast.AST],
               path: Callable[[ast.expr], str | None]) -> list[tuple[ast.AST, str]]:
    """(node, message) for every use of launch_pdl the rule above does not allow. `path` gives the dotted name
    an expression refers to through the file's imports (None when it is not a module attribute)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == KEYWORD:
            out.append((node, f'the string "{KEYWORD}" can only smuggle the option past this rule (a **options '
                              f"dict); write {KEYWORD}=... as a keyword of the kernel[grid](...) launch"))
        if not (isinstance(node, ast.keyword) and node.arg == KEYWORD):
            continue
        call = parents.get(id(node))
        func = call.func if isinstance(call, ast.Call) else None
        name = func.value.id if isinstance(func, ast.Subscript) and isinstance(func.value, ast.Name) else None
        if name not in kernels:
            out.append((call or node, f"{KEYWORD} may only be a keyword of a direct launch of one of the file's "
                                      f"kernels, kernel[grid](..., {KEYWORD}=...), where the lint can check that "
                                      "the kernel waits for the one before it"))
        elif not _off(node.value) and not _waits_first(kernels[name], call, node.value, path):
            out.append((call, f"{name} is launched with {KEYWORD}={ast.unparse(node.value)[:40]} but does not "
                              f"wait first: it could read its inputs while an earlier kernel still writes them; "
                              + FIX))
    return out
