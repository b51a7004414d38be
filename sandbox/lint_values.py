"""Function values and call resolution for the lint's tensor derivation (a mixin of lint_flow.Flow).

`resolve` names what a call calls (lint_calls.Callee); `kernel_ref` which kernels a name stands for
(a module-level @triton.jit function, or a launch helper's parameter every call site fills with one);
`function_values` which of the file's functions an expression may be. `_function_values` classifies
every use of a function value: called or bound to a helper's parameter (its call sites carry the
flags), handed to triton as a launch-time callback (its parameter is triton's argument dict, read
through `launch_arg`), given to sorted/min/max/functools.reduce (it gets their elements), or
anything else (stored, returned, put in a table, given to an unknown call: it gets tensors).
"""
from __future__ import annotations

import ast

from sandbox import lint_policy as P
from sandbox.lint_calls import Callee
from sandbox.lint_scopes import Scope

CLEAN, TENSOR, CONTAINER, STATE = 0, 1, 2, 4
UNKNOWN = TENSOR | CONTAINER
_CONTAINERS = (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Starred)
# Partials of partials: deeper chains, or a name bound to more partials than this, are not followed
# (unresolved, so rejected): the resolution branches on every definition and must stay cheap.
_MAX_DEPTH, _MAX_PARTIAL_DEFS = 4, 3


class FunctionValues:
    """Needs from Flow: b (ScopeBuilder), root, aliases, kernel_names, kernel_params, param_other,
    partial_defs, not_partial, parents, callbacks, escaped, siblings, called_params, names,
    kernel_arg_flags, by_id, op_scope, expr(), _param(), _in_kernel()."""

    def host_function(self, name: str, scope: Scope) -> Scope | None:
        home = scope.lookup(name)
        return home.functions.get(name) if home is not None else None

    def module_path(self, node: ast.expr, scope: Scope) -> str | None:
        """Dotted path of a Name/Attribute chain rooted at a module-level import alias."""
        attrs: list[str] = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        home = scope.lookup(node.id)
        if home is not None and home is not self.root:
            return None
        if node.id not in self.aliases:
            return None
        return ".".join([self.aliases[node.id]] + attrs[::-1])

    def resolve(self, func: ast.expr, scope: Scope, depth: int = 0) -> Callee:
        """What `func(...)` calls (see lint_calls.py)."""
        if isinstance(func, ast.Lambda):
            return Callee("host", fns=(self.b.scopes[id(func)],))
        path = self.module_path(func, scope) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if path is not None:
            return Callee("module", path)
        if isinstance(func, ast.Name):
            home = scope.lookup(func.id)
            if home is None:
                return Callee("builtin", func.id)
            fn = home.functions.get(func.id)
            if fn is not None:
                return Callee("host", fns=(fn,))
            if home is self.root and func.id in self.kernel_names:
                return Callee("unresolved", "kernel")
            key = (id(home), func.id)
            defs = self.partial_defs.get(key)
            if defs and key not in self.not_partial and len(defs) <= _MAX_PARTIAL_DEFS and depth < _MAX_DEPTH:
                return Callee("partial", inner=tuple(self._partial_target(c.args[0], s, depth) for c, s in defs),
                              bound=tuple(c for c, _ in defs))
            return Callee("unresolved", "parameter" if func.id in home.params and home is not self.root
                          else "variable")
        if isinstance(func, ast.Attribute):
            return Callee("method", func.attr)
        if isinstance(func, ast.Subscript):
            kernels = self.kernel_ref(func.value, scope)
            if kernels:
                return Callee("launch", kernels=kernels)
            if isinstance(func.value, ast.Name) and scope.lookup(func.value.id) not in (None, self.root) and \
                    func.value.id in (scope.lookup(func.value.id).params):
                return Callee("unresolved", "not-a-kernel")
            return Callee("unresolved", "subscript")
        if isinstance(func, ast.Call) and self._is_partial_call(func, scope) and depth < _MAX_DEPTH:
            return Callee("partial", inner=(self._partial_target(func.args[0], scope, depth),), bound=(func,))
        return Callee("unresolved", "call-result" if isinstance(func, ast.Call) else "expression")

    def _partial_target(self, node: ast.expr, scope: Scope, depth: int) -> Callee:
        """What functools.partial(node, ...) wraps: the file's functions, a kernel[grid] launch or another
        partial. A library function or a method would take the call's tensors past the argument rules."""
        inner = self.resolve(node, scope, depth + 1)
        if inner.kind in ("host", "launch", "partial", "unresolved"):
            return inner
        return Callee("unresolved", "partial-target")

    def kernel_ref(self, node: ast.expr, scope: Scope) -> tuple[str, ...]:
        """The kernels a name stands for: a module-level @triton.jit function, or a launch helper's
        parameter that every call site fills with one."""
        if not isinstance(node, ast.Name):
            return ()
        home = scope.lookup(node.id)
        if home is self.root and node.id in self.kernel_names:
            return (node.id,)
        if home is None or node.id not in home.params:
            return ()
        key = (id(home), node.id)
        if key in self.param_other or not self.kernel_params.get(key):
            return ()
        return tuple(sorted(self.kernel_params[key]))


    # -- functions used as values
    def function_values(self, node: ast.expr, scope: Scope, depth: int = 0) -> set[int]:
        """Ids of the file's function scopes an expression may evaluate to."""
        if depth >= _MAX_DEPTH:
            return set()
        if isinstance(node, ast.Lambda):
            return {id(self.b.scopes[id(node)])}
        if isinstance(node, ast.Call) and self._is_partial_call(node, scope):
            return self.function_values(node.args[0], scope, depth + 1)
        if isinstance(node, ast.Name):
            fn = self.host_function(node.id, scope)
            if fn is not None:
                return {id(fn)}
            home = scope.lookup(node.id)
            if home is not None and node.id in home.params:
                return set(self.fparams.get((id(home), node.id), ()))
            key = (id(home), node.id) if home is not None else None
            if key in self.partial_defs and key not in self.not_partial and \
                    len(self.partial_defs[key]) <= _MAX_PARTIAL_DEFS:
                out: set[int] = set()
                for call, s in self.partial_defs[key]:
                    out |= self.function_values(call.args[0], s, depth + 1)
                return out
        return set()

    def _function_values(self) -> None:
        occurrences: list[tuple[ast.expr, Scope]] = [(name, scope) for name, scope in self.b.refs]
        occurrences += [(s.node, s.parent) for s in self.b.all if s.kind == "lambda" and s.parent is not None]
        for node, scope in occurrences:
            if self._in_kernel(scope):
                continue
            values = self.function_values(node, scope)
            values.discard(id(self.op_scope))
            if not values:
                continue
            use = self._use(node, scope)
            for v in values:
                if use == "callback":
                    self.callbacks.add(v)
                elif use == "escape":
                    self.escaped.add(v)
                elif isinstance(use, int):
                    self.siblings[v] = self.siblings.get(v, CLEAN) | use
        for v in self.callbacks | self.escaped | set(self.siblings):
            fn = self.by_id[v]
            for p in fn.params:
                if v in self.escaped:
                    self._param(fn, p, UNKNOWN)
                    self.param_other.add((v, p))
                elif v in self.callbacks:
                    self._param(fn, p, CONTAINER)
                else:
                    self._param(fn, p, self.siblings[v])

    def _use(self, node: ast.expr, scope: Scope) -> str | int:
        """How a function value is used: "neutral" (called, bound to a helper's parameter: the call
        sites carry the flags), "callback" (triton calls it at launch), "escape" (anything else),
        or the flags a builtin such as sorted(key=...) gives it."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Call) and parent.func is node:
            return "neutral"
        child, inside = node, False
        while isinstance(parent, _CONTAINERS):
            child, parent, inside = parent, self.parents.get(id(parent)), True
        if isinstance(parent, ast.keyword):
            child, parent = parent, self.parents.get(id(parent))
        if isinstance(parent, ast.Call) and child is not parent.func:
            callee = self.resolve(parent.func, scope)
            if callee.kind == "module":
                if callee.path == "triton.set_allocator":
                    return CLEAN                            # called with (size, alignment, stream): ints
                if callee.path in P.TRITON_CALLBACK_TAKERS:
                    return "callback"
                if callee.path == "functools.partial" and parent.args and parent.args[0] is node:
                    # the partial object is the function value now: `run = partial(f, ...)` is judged by the
                    # uses of `run`, `partial(f, ...)(...)` is a call, anything else by the partial's own use
                    holder = self.parents.get(id(parent))
                    if isinstance(holder, ast.Assign) and holder.value is parent and len(holder.targets) == 1 \
                            and isinstance(holder.targets[0], ast.Name):
                        return "neutral"
                    return self._use(parent, scope)
                if callee.path == "functools.reduce" and not inside:
                    return self._sibling_flags(parent, node, scope)
                return "escape"
            if inside:
                return "escape"
            if callee.kind in ("host", "partial"):
                return "neutral"
            if callee.kind == "builtin":
                return self._sibling_flags(parent, node, scope)
            return "escape"
        if isinstance(parent, ast.Subscript) and parent.slice is node and self.kernel_ref(parent.value, scope):
            return "callback"                               # kernel[grid]: triton calls grid(meta)
        if isinstance(node, ast.Lambda) and isinstance(parent, ast.Assign) and parent.value is node and \
                self.b.scopes[id(node)].name:
            return "neutral"                                # a named lambda: its name's uses count
        if isinstance(parent, ast.Expr):
            return "neutral"
        return "escape"

    def _sibling_flags(self, call: ast.Call, node: ast.expr, scope: Scope) -> int:
        """sorted(xs, key=f), functools.reduce(f, xs): f is called with elements of the other arguments."""
        flags = CLEAN
        for a in call.args + [k.value for k in call.keywords]:
            if a is not node:
                f = self.expr(a, scope)
                flags |= _element(f) | (f & TENSOR)
        return flags

    def _is_partial_call(self, node: ast.expr, scope: Scope) -> bool:
        return isinstance(node, ast.Call) and bool(node.args) and \
            self.module_path(node.func, scope) == "functools.partial"


    def launch_arg(self, node: ast.expr, key: ast.expr | None, scope: Scope) -> int | None:
        """Flags of `args["name"]` / `args.get("name")` on a launch callback's argument dict, else None."""
        if not (isinstance(node, ast.Name) and isinstance(key, ast.Constant) and isinstance(key.value, str)):
            return None
        home = scope.lookup(node.id)
        if home is None or node.id not in home.params or id(home) not in self.callbacks or \
                id(home) in self.escaped or self.names.get((id(home), node.id)) or \
                (id(home), node.id) in self.called_params or node.id in home.defaults:
            return None
        return self.kernel_arg_flags.get(key.value, CLEAN)


def _root_name(node: ast.expr) -> ast.Name | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node if isinstance(node, ast.Name) else None


def _element(flags: int) -> int:
    """Flags of an element taken out of a value with `flags` (iteration, unpacking)."""
    out = flags & STATE
    if flags & UNKNOWN:
        out |= TENSOR
    return out


def _packed(flags: int) -> int:
    """Flags of a new container holding a value with `flags`."""
    return CONTAINER if flags & UNKNOWN else CLEAN
