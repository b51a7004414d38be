"""Tensor derivation for the lint: which expressions hold tensors or module state.

The lint's PyTorch rule is syntactic: arithmetic, comparisons, indexing with tensors, and most
builtins are allowed in launcher code only on values *not derived from a tensor*. The analysis is
sound by construction: every call's result carries the flags of its arguments and of its callee
object (a bound method of a tensor, a partial's bound arguments, a helper's returns) unless the
callee is on a short list of calls known to return sizes, dtypes, devices or a new allocation
(lint_policy.torch_call_kind, TENSOR_META). A callee the lint cannot resolve (lint_calls.py) is
rejected by the lint and counts as returning a tensor here.

Values carry flags: TENSOR (derived from tensor contents), CONTAINER (holds such a value),
STATE (module-level state, or reached from it). Sources of TENSOR: op-function parameters without
a scalar default, torch allocations, parameters a call site or a default fills with one, and the
parameters of functions the lint cannot follow (a function passed around as a value gets tensors).
Functions triton calls at launch (heuristics, grid callables, Config hooks, prune and perf-model
callbacks, set_allocator) get triton's dict of the kernel's real arguments: `args["name"]` with a
literal key carries whatever the file's launches pass for that kernel parameter (a tensor for a
pointer, a size for a size); any other use of the dict counts as a tensor.

The analysis is flow-insensitive (a name is tensor-derived if any assignment makes it so; a
container is if anything is stored into it, by `d[k] = t`, `xs.append(t)` or from a closure) and
interprocedural over the file's own functions, iterated to a fixpoint.
"""
from __future__ import annotations

import ast

from sandbox import lint_policy as P
from sandbox.lint_calls import DIRECT, ELEMENT, PACKED, Callee, arguments, call_items
from sandbox.lint_scopes import Scope, ScopeBuilder
from sandbox.lint_values import (CLEAN, CONTAINER, STATE, TENSOR, UNKNOWN, FunctionValues, _element, _packed,
                                 _root_name)

__all__ = ["CLEAN", "CONTAINER", "STATE", "TENSOR", "UNKNOWN", "Flow", "MAX_ROUNDS"]
# Rounds of the fixpoint; each round carries flags at least one call deeper. Not converging within
# them leaves flags incomplete, so the lint rejects the file instead (the seeds and honest corpus settle in 2-3).
MAX_ROUNDS = 40


class Flow(FunctionValues):
    """Fixpoint of tensor/state derivation over the scopes a ScopeBuilder found."""

    def __init__(self, builder: ScopeBuilder, root: Scope, aliases: dict[str, str], kernel_names: set[str]):
        self.b = builder
        self.root = root
        self.aliases = aliases                    # module-level import alias -> dotted path
        self.kernel_names = kernel_names
        self.kernel_scopes = {s.name: s for s in builder.all if s.kind == "kernel"}
        self.names: dict[tuple[int, str], int] = {}
        self.params: dict[int, dict[str, int]] = {}
        self.rets: dict[int, int] = {}
        self.kernel_params: dict[tuple[int, str], set[str]] = {}    # launch-helper parameter -> kernels
        self.param_other: set[tuple[int, str]] = set()              # ... that also receives non-kernels
        self.called_params: set[tuple[int, str]] = set()            # parameters some call site fills
        self.fparams: dict[tuple[int, str], set[int]] = {}          # parameter -> function scopes it holds
        self.kernel_arg_flags: dict[str, int] = {}                  # kernel parameter name -> launch flags
        self.callbacks: set[int] = set()                            # function scopes triton calls at launch
        self.escaped: set[int] = set()                              # function scopes used as plain values
        self.siblings: dict[int, int] = {}                          # lambdas given to builtins (sorted key=)
        self.parents: dict[int, ast.AST] = {}
        self.partial_defs: dict[tuple[int, str], list[tuple[ast.Call, Scope]]] = {}
        self.not_partial: set[tuple[int, str]] = set()
        self.by_id = {id(s): s for s in builder.all}
        self.call_scopes = {id(call): scope for call, scope in builder.calls}

    # -- public
    def run(self, op_scope: Scope | None) -> None:
        for node in ast.walk(self.root.node):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
        for scope in self.b.all:
            for target, how, value in scope.sources:
                if isinstance(target, ast.Name):
                    home = scope.lookup(target.id) or scope
                    key = (id(home), target.id)
                    if how == "value" and self._is_partial_call(value, scope) and target.id not in home.params:
                        self.partial_defs.setdefault(key, []).append((value, scope))
                    else:
                        self.not_partial.add(key)
        self.op_scope = op_scope
        if op_scope is not None:
            self.params[id(op_scope)] = {p: (CLEAN if p in op_scope.scalar_params else TENSOR)
                                         for p in op_scope.params}
        self.converged = False
        for _ in range(MAX_ROUNDS):
            before = (dict(self.names), {k: dict(v) for k, v in self.params.items()}, dict(self.rets),
                      {k: set(v) for k, v in self.kernel_params.items()}, set(self.param_other),
                      {k: set(v) for k, v in self.fparams.items()}, dict(self.kernel_arg_flags),
                      set(self.callbacks), set(self.escaped), dict(self.siblings))
            self._step()
            after = (self.names, self.params, self.rets, self.kernel_params, self.param_other, self.fparams,
                     self.kernel_arg_flags, self.callbacks, self.escaped, self.siblings)
            if before == after:
                self.converged = True
                return

    def expr(self, node: ast.expr | None, scope: Scope) -> int:
        """Derivation flags of an expression evaluated in `scope`."""
        if node is None or isinstance(node, ast.Constant):
            return CLEAN
        method = getattr(self, "_e_" + type(node).__name__, None)
        if method is not None:
            return method(node, scope)
        flags = CLEAN
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                flags |= self.expr(child, scope)
        return flags

    # -- fixpoint step
    def _step(self) -> None:
        for scope in self.b.all:
            if scope.kind == "kernel" or self._in_kernel(scope):
                continue
            for p, default in scope.defaults.items():       # def f(t=x): the default's flags; def f(c=_CACHE)
                flags = self.expr(default, scope.parent) if scope.parent is not None else CLEAN
                if self._is_module_state(default, scope):
                    flags |= STATE
                if scope is not self.op_scope:
                    self._param(scope, p, flags)
            for target, how, value in scope.sources:
                flags = self.expr(value, scope)
                if how == "iter":
                    flags = _element(flags)
                elif how == "unknown":
                    flags = UNKNOWN
                elif how == "aug":
                    flags |= self.expr(target, scope) if isinstance(target, ast.Name) else CLEAN
                self._assign(target, flags, scope, value if how == "value" else None)
            if scope.kind in ("function", "lambda"):
                ret = CLEAN
                for r in scope.returns:
                    ret |= self.expr(r, scope)
                for y in scope.yields:
                    ret |= _packed(self.expr(y, scope))
                self.rets[id(scope)] = self.rets.get(id(scope), CLEAN) | ret
        for call, scope in self.b.calls:
            if not self._in_kernel(scope):
                self._call_site(call, scope)
        self._function_values()

    def _in_kernel(self, scope: Scope) -> bool:
        s: Scope | None = scope
        while s is not None:
            if s.kind == "kernel":
                return True
            s = s.parent
        return False

    def _param(self, fn: Scope, p: str, flags: int) -> None:
        params = self.params.setdefault(id(fn), {})
        params[p] = params.get(p, CLEAN) | flags

    def _bind(self, fn: Scope, pos, kws) -> None:
        for p, expr, scope, how in arguments(fn, pos, kws):
            flags = self.expr(expr, scope)
            flags = _element(flags) if how == ELEMENT else _packed(flags) if how == PACKED else flags
            if fn.kind == "kernel":
                self.kernel_arg_flags[p] = self.kernel_arg_flags.get(p, CLEAN) | flags
                continue
            self._param(fn, p, flags)
            key = (id(fn), p)
            self.called_params.add(key)
            kernels = self.kernel_ref(expr, scope) if how == DIRECT else ()
            if kernels:
                self.kernel_params.setdefault(key, set()).update(kernels)
            else:
                self.param_other.add(key)
            values = self.function_values(expr, scope) if how == DIRECT else set()
            if values:
                self.fparams.setdefault(key, set()).update(values)

    def _call_site(self, call: ast.Call, scope: Scope) -> None:
        callee = self.resolve(call.func, scope)
        pos, kws = call_items(call, scope)
        if callee.kind == "method" and callee.path in P.MUTATING_METHODS:
            root = _root_name(call.func.value)
            if root is not None:
                flags = CLEAN
                for a in call.args + [k.value for k in call.keywords]:
                    flags |= self.expr(a, scope)
                self._store_into(root, _packed(flags), scope)
        else:
            self._bind_callee(callee, pos, kws, scope)

    def _bind_callee(self, callee: Callee, pos, kws, scope: Scope, depth: int = 0) -> None:
        """Arguments into the parameters of the file's functions and kernels a call reaches; through a
        partial, its bound arguments come first (functools.partial's own rule)."""
        if callee.kind == "host":
            for fn in callee.fns:
                self._bind(fn, pos, kws)
        elif callee.kind == "launch":
            for k in callee.kernels:
                self._bind(self.kernel_scopes[k], pos, kws)
        elif callee.kind == "partial" and depth < 8:
            for inner, pcall in zip(callee.inner, callee.bound):
                home = self._scope_of(pcall, scope)
                ppos, pkws = call_items(pcall, home, skip=1)
                self._bind_callee(inner, ppos + pos, pkws + kws, home, depth + 1)

    def _scope_of(self, node: ast.AST, default: Scope) -> Scope:
        return self.call_scopes.get(id(node), default)

    # -- helpers
    def _is_module_state(self, node: ast.expr, scope: Scope) -> bool:
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        if not isinstance(node, ast.Name) or scope.parent is None:
            return False
        return scope.parent.lookup(node.id) is self.root and node.id in self.root.state_names

    def _store_into(self, root: ast.Name, flags: int, scope: Scope) -> None:
        if not flags:
            return
        home = scope.lookup(root.id) or scope
        key = (id(home), root.id)
        self.names[key] = self.names.get(key, CLEAN) | flags

    def _assign(self, target: ast.expr, flags: int, scope: Scope, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            home = scope.lookup(target.id) or scope
            key = (id(home), target.id)
            self.names[key] = self.names.get(key, CLEAN) | flags
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            if (isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elts)
                    and not any(isinstance(e, ast.Starred) for e in elts + value.elts)):
                for t, v in zip(elts, value.elts):
                    self._assign(t, self.expr(v, scope), scope, v)
            else:
                for t in elts:
                    self._assign(t, _element(flags), scope, None)
        elif isinstance(target, ast.Starred):
            self._assign(target.value, flags | (CONTAINER if flags & TENSOR else CLEAN), scope, None)
        elif isinstance(target, ast.Subscript):             # d[k] = t: d now holds a tensor
            root = _root_name(target.value)
            if root is not None:
                self._store_into(root, _packed(flags), scope)

    # -- expressions
    def _e_Name(self, node: ast.Name, scope: Scope) -> int:
        home = scope.lookup(node.id)
        if home is None:
            return CLEAN
        flags = self.names.get((id(home), node.id), CLEAN)
        if node.id in home.params:
            flags |= self.params.get(id(home), {}).get(node.id, CLEAN)
        if home is self.root and scope.function_scope() is not self.root and node.id in self.root.state_names:
            flags |= STATE
        return flags

    def _e_Attribute(self, node: ast.Attribute, scope: Scope) -> int:
        if self.module_path(node, scope) is not None:
            return CLEAN
        base = self.expr(node.value, scope)
        flags = base & (STATE | CONTAINER)
        if base & TENSOR and node.attr not in P.TENSOR_META:
            flags |= TENSOR
        return flags

    def _e_Subscript(self, node: ast.Subscript, scope: Scope) -> int:
        arg = self.launch_arg(node.value, node.slice, scope)
        if arg is not None:
            return arg
        base = self.expr(node.value, scope)
        return (TENSOR if base & (TENSOR | CONTAINER) else CLEAN) | (base & STATE)

    def _e_Call(self, node: ast.Call, scope: Scope) -> int:
        callee = self.resolve(node.func, scope)
        args = CLEAN
        for a in node.args + [k.value for k in node.keywords]:
            args |= self.expr(a, scope)
        return self._result(callee, node, args, scope)

    def _result(self, callee: Callee, node: ast.Call, args: int, scope: Scope, depth: int = 0) -> int:
        kind = callee.kind
        if kind == "module":
            what = P.torch_call_kind(callee.path)
            return TENSOR if what == "tensor" else CLEAN if what == "clean" else args
        if kind == "builtin":
            if callee.path in P.TENSOR_SAFE_BUILTINS:
                return CLEAN
            if callee.path in P.CONTAINER_SAFE_BUILTINS:
                return CONTAINER if args & UNKNOWN else CLEAN
            return (TENSOR if args & UNKNOWN else CLEAN) | (args & STATE)
        if kind == "host":
            flags = CLEAN
            for fn in callee.fns:
                flags |= self.rets.get(id(fn), CLEAN)
            return flags
        if kind == "launch":
            return CLEAN
        if kind == "partial" and depth < 8:
            flags = CLEAN
            for inner, pcall in zip(callee.inner, callee.bound):
                bound = CLEAN
                for a in pcall.args[1:] + [k.value for k in pcall.keywords]:
                    bound |= self.expr(a, self._scope_of(pcall, scope))
                flags |= self._result(inner, node, args | bound, scope, depth + 1)
            return flags
        if kind == "method":
            return self._method_result(node, callee.path, args, scope)
        return UNKNOWN | args

    def _method_result(self, node: ast.Call, attr: str, args: int, scope: Scope) -> int:
        recv_node = node.func.value
        if attr == "get" and node.args:
            arg = self.launch_arg(recv_node, node.args[0], scope)
            if arg is not None:
                return arg | (self.expr(node.args[1], scope) if len(node.args) > 1 else CLEAN)
        recv = self.expr(recv_node, scope)
        if recv & TENSOR:
            if attr in P.TENSOR_META:
                return CLEAN
            if attr in P.TENSOR_SPLITS:
                return CONTAINER
            return TENSOR
        flags = recv & STATE if attr != "copy" else CLEAN
        if recv & CONTAINER:
            flags |= TENSOR if attr in ("get", "pop", "setdefault") else CONTAINER
        if args & UNKNOWN:
            flags |= TENSOR
        return flags

    def _e_BinOp(self, node: ast.BinOp, scope: Scope) -> int:
        return self.expr(node.left, scope) | self.expr(node.right, scope)

    def _e_Compare(self, node: ast.Compare, scope: Scope) -> int:
        flags = self.expr(node.left, scope)
        for c in node.comparators:
            flags |= self.expr(c, scope)
        only_identity = all(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops)
        return TENSOR if (flags & TENSOR and not only_identity) else CLEAN

    def _collection(self, elts: list[ast.expr | None], scope: Scope) -> int:
        flags = CLEAN
        for e in elts:
            flags |= self.expr(e, scope)
        return (CONTAINER if flags & UNKNOWN else CLEAN) | (flags & STATE)

    def _e_List(self, node: ast.List, scope: Scope) -> int:
        return self._collection(node.elts, scope)

    _e_Tuple = _e_Set = _e_List

    def _e_Dict(self, node: ast.Dict, scope: Scope) -> int:
        return self._collection(list(node.keys) + list(node.values), scope)

    def _e_comprehension(self, node: ast.AST, scope: Scope) -> int:
        inner = self.b.scopes.get(id(node), scope)
        elts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        return self._collection(elts, inner) & ~STATE

    _e_ListComp = _e_SetComp = _e_DictComp = _e_GeneratorExp = _e_comprehension

    def _e_Lambda(self, node: ast.Lambda, scope: Scope) -> int:
        return CLEAN        # a function value: how it is used decides its parameters' flags

    def _e_JoinedStr(self, node: ast.JoinedStr, scope: Scope) -> int:
        return CLEAN

    def _e_NamedExpr(self, node: ast.NamedExpr, scope: Scope) -> int:
        return self.expr(node.value, scope)

    def _e_Yield(self, node: ast.expr, scope: Scope) -> int:
        return UNKNOWN      # whatever the caller sends in

    _e_YieldFrom = _e_Await = _e_Yield


