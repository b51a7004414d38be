"""What a call in a candidate's launcher calls, and which parameter each argument lands in.

The tensor-derivation analysis (lint_flow.py) is sound only if every call is understood: a call
whose callee the lint cannot name would let a tensor go in and a "clean" value come out. So every
call's callee is resolved to one of:

  module    a library path (torch.empty, triton.cdiv, functools.partial, typing.cast ...)
  builtin   a Python builtin called by its own name (len, min, sum ...)
  host      one of the file's own functions or lambdas (by name, or a lambda called in place)
  launch    kernel[grid](...) of a @triton.jit kernel, or of a launch helper's parameter that
            every call site fills with a kernel
  partial   functools.partial(f, ...)(...) or a name bound only to functools.partial(f, ...)
  method    value.name(...) on a value that is not a module
  unresolved  anything else (table[key](...), make()(...), a variable or parameter holding a
            function, a kernel called without a grid): the lint rejects it, code `call`

`arguments` maps a call's arguments onto a callee's parameters the way Python does (positional,
keyword, *args, **kwargs, through partial's bound arguments), so flags flow to the right parameter.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from sandbox.lint_scopes import Scope


@dataclass(frozen=True)
class Callee:
    kind: str                                   # module | builtin | host | launch | partial | method | unresolved
    path: str = ""                              # module path, builtin name, method name, or why unresolved
    fns: tuple[Scope, ...] = ()                 # host: the function scopes
    kernels: tuple[str, ...] = ()               # launch: the kernels
    inner: tuple["Callee", ...] = ()            # partial: what each functools.partial(...) wraps
    bound: tuple[ast.Call, ...] = ()            # partial: the functools.partial(...) calls (same order)


# How an argument reaches a parameter: as itself, as one element of it (*xs, **kw), or inside a
# new container (extra positionals collected into *args).
DIRECT, ELEMENT, PACKED = "direct", "element", "packed"


def call_items(call: ast.Call, scope: Scope, skip: int = 0) -> tuple[list[tuple[ast.expr, Scope, bool]],
                                                                     list[tuple[str | None, ast.expr, Scope]]]:
    """(positional [(expr, scope, starred)], keyword [(name or None for **, expr, scope)])."""
    pos = [(a.value if isinstance(a, ast.Starred) else a, scope, isinstance(a, ast.Starred))
           for a in call.args[skip:]]
    kws = [(k.arg, k.value, scope) for k in call.keywords]
    return pos, kws


def arguments(fn: Scope, pos: list[tuple[ast.expr, Scope, bool]],
              kws: list[tuple[str | None, ast.expr, Scope]]) -> list[tuple[str, ast.expr, Scope, str]]:
    """[(parameter, argument expression, its scope, DIRECT | ELEMENT | PACKED)] for a call of fn."""
    out: list[tuple[str, ast.expr, Scope, str]] = []
    i = 0
    unknown_from = None                          # after a *xs, later positions are unknown
    for expr, scope, starred in pos:
        if starred or unknown_from is not None:
            unknown_from = i if unknown_from is None else unknown_from
            how = ELEMENT if starred else DIRECT
            out += [(p, expr, scope, how) for p in fn.posparams[unknown_from:]]
            if fn.vararg:
                out.append((fn.vararg, expr, scope, PACKED if not starred else DIRECT))
            continue
        if i < len(fn.posparams):
            out.append((fn.posparams[i], expr, scope, DIRECT))
        elif fn.vararg:
            out.append((fn.vararg, expr, scope, PACKED))
        i += 1
    named = fn.posparams + fn.kwonly
    for name, expr, scope in kws:
        if name is None:
            out += [(p, expr, scope, ELEMENT) for p in named]
            if fn.kwarg:
                out.append((fn.kwarg, expr, scope, DIRECT))
        elif name in named:
            out.append((name, expr, scope, DIRECT))
        elif fn.kwarg:
            out.append((fn.kwarg, expr, scope, PACKED))
    return out


def unresolved_message(call: ast.Call, why: str) -> str:
    shown = ast.unparse(call.func)[:50]
    fixes = {
        "subscript": f"`{shown}(...)` calls through a subscript: the lint cannot tell which function runs; call "
                     "functions by name (a kernel is launched as kernel[grid](...), with a kernel defined in this file "
                     "or passed to a launch helper by name)",
        "call-result": f"`{shown}(...)` calls the result of a call: the lint cannot tell which function runs; call "
                       "functions by name (functools.partial(f, ...)(...) is fine)",
        "variable": f"`{shown}(...)` calls a variable: the lint cannot tell which function it holds; call a def "
                    "or a lambda by the name it was defined with (functools.partial(f, ...) bound to a name is fine)",
        "parameter": f"`{shown}(...)` calls a parameter (a function passed in): the lint cannot tell which function "
                     "runs; call the helper by name, or pass a @triton.jit kernel and launch it as param[grid](...)",
        "kernel": f"`{shown}(...)` calls a @triton.jit kernel without a grid; launch it as {shown}[grid](...)",
        "not-a-kernel": f"`{shown}(...)` launches a parameter that is not a @triton.jit kernel at every call site "
                        "(or the helper is passed around as a value); pass a kernel defined in this file by name",
        "partial-target": f"`{shown}(...)`: functools.partial may wrap only this file's functions, lambdas and "
                          "kernel[grid] launches; call library functions and methods directly",
        "expression": f"`{shown}(...)` calls an expression the lint cannot resolve; call functions by name",
    }
    return fixes.get(why, fixes["expression"])
