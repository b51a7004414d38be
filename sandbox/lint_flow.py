"""Scopes and tensor derivation for the lint: which expressions hold tensors or module state.

The lint's PyTorch rule is syntactic: arithmetic, comparisons, indexing with tensors, and most
builtins are allowed in launcher code only on values *not derived from a tensor*. A value is
derived from a tensor when it is (transitively) an op-function parameter without a scalar
default, the result of a torch allocation, a view of such a value, an element of a container
holding one, or a helper's parameter/return that receives/returns one. Metadata (`.shape`,
`.stride()`, `.numel()`, `.dtype`, ...) is not derived: sizes are plain ints.

The analysis is flow-insensitive (a name is tensor-derived if any assignment makes it so) and
interprocedural over the file's own functions, iterated to a fixpoint. It errs towards "derived":
the lint rejects when in doubt, and the message says to move the work into the kernel.

Module state: inside a function, a name that resolves to a module-level variable (or anything
reached from it by indexing, attribute access or `.get(...)`) carries the STATE flag; writes
through it are the module-level caches the policy forbids.
"""
from __future__ import annotations

import ast

from sandbox import lint_policy as P
from sandbox.lint_scopes import Scope, ScopeBuilder

CLEAN, TENSOR, CONTAINER, STATE = 0, 1, 2, 4


class Flow:
    """Fixpoint of tensor/state derivation over the scopes a ScopeBuilder found."""

    def __init__(self, builder: ScopeBuilder, root: Scope, aliases: dict[str, str]):
        self.b = builder
        self.root = root
        self.aliases = aliases                    # module-level import alias -> dotted path
        self.names: dict[tuple[int, str], int] = {}
        self.params: dict[int, dict[str, int]] = {}
        self.rets: dict[int, int] = {}
        self.called: set[int] = set()             # ids of Name nodes that are a call's func

    # -- public
    def run(self, op_scope: Scope | None) -> None:
        for call, _ in self.b.calls:
            if isinstance(call.func, ast.Name):
                self.called.add(id(call.func))
        if op_scope is not None:
            self.params[id(op_scope)] = {p: (CLEAN if p in op_scope.scalar_params else TENSOR)
                                         for p in op_scope.params}
        for _ in range(40):
            before = (dict(self.names), {k: dict(v) for k, v in self.params.items()}, dict(self.rets))
            self._step(op_scope)
            if before == (self.names, self.params, self.rets):
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

    # -- fixpoint step
    def _step(self, op_scope: Scope | None) -> None:
        for scope in self.b.all:
            if scope.kind == "kernel":
                continue
            for p, default in scope.defaults.items():       # def f(x, cache=_CACHE): a module object
                if scope.parent is not None and self.expr(default, scope.parent) & STATE or \
                        self._is_module_state(default, scope):
                    params = self.params.setdefault(id(scope), {})
                    params[p] = params.get(p, CLEAN) | STATE
            for target, how, value in scope.sources:
                flags = self.expr(value, scope)
                if how == "iter":
                    flags = _element(flags)
                elif how == "aug":
                    flags |= self.expr(target, scope) if isinstance(target, ast.Name) else CLEAN
                self._assign(target, flags, scope, value if how == "value" else None)
            if scope.kind in ("function", "lambda"):
                ret = CLEAN
                for r in scope.returns:
                    ret |= self.expr(r, scope)
                self.rets[id(scope)] = self.rets.get(id(scope), CLEAN) | (ret & ~STATE)
        for call, scope in self.b.calls:
            self._call_site(call, scope)
        for name, scope in self.b.refs:
            if id(name) in self.called or id(name) in self.b.grid_names:
                continue
            fn = self.host_function(name.id, scope)
            if fn is not None and fn is not op_scope:
                params = self.params.setdefault(id(fn), {})
                for p in fn.params:
                    params[p] = params.get(p, CLEAN) | TENSOR
        for lam_id, (call, scope) in self.b.lambda_args.items():
            lam = self.b.scopes.get(lam_id)
            if lam is None or lam.name:
                continue
            siblings = CLEAN
            for arg in call.args + [k.value for k in call.keywords]:
                if not isinstance(arg, ast.Lambda):
                    siblings |= self.expr(arg, scope)
            params = self.params.setdefault(id(lam), {})
            for p in lam.params:
                params[p] = params.get(p, CLEAN) | _element(siblings) | (siblings & TENSOR)

    def _is_module_state(self, node: ast.expr, scope: Scope) -> bool:
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        if not isinstance(node, ast.Name) or scope.parent is None:
            return False
        return scope.parent.lookup(node.id) is self.root and node.id in self.root.state_names

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

    def _call_site(self, call: ast.Call, scope: Scope) -> None:
        if not isinstance(call.func, ast.Name):
            return
        fn = self.host_function(call.func.id, scope)
        if fn is None:
            return
        params = self.params.setdefault(id(fn), {})
        for i, arg in enumerate(call.args):
            flags = self.expr(arg, scope)
            if isinstance(arg, ast.Starred):
                for p in fn.params:
                    params[p] = params.get(p, CLEAN) | _element(flags)
            elif i < len(fn.params):
                p = fn.params[i]
                params[p] = params.get(p, CLEAN) | flags
        for kw in call.keywords:
            flags = self.expr(kw.value, scope)
            targets = fn.params if kw.arg is None else [kw.arg]
            for p in targets:
                if p in fn.params:
                    params[p] = params.get(p, CLEAN) | (_element(flags) if kw.arg is None else flags)

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
        base = self.expr(node.value, scope)
        return (TENSOR if base & (TENSOR | CONTAINER) else CLEAN) | (base & STATE)

    def _e_Call(self, node: ast.Call, scope: Scope) -> int:
        func = node.func
        path = self.module_path(func, scope)
        if path is not None:
            return TENSOR if P.torch_call_kind(path) == "tensor" else CLEAN
        if isinstance(func, ast.Subscript):                     # kernel[grid](...)
            return CLEAN
        if isinstance(func, ast.Name):
            fn = self.host_function(func.id, scope)
            if fn is not None:
                return self.rets.get(id(fn), CLEAN)
            if scope.lookup(func.id) is None:                   # a builtin
                args = CLEAN
                for a in node.args:
                    args |= self.expr(a, scope)
                if func.id in P.CONTAINER_SAFE_BUILTINS:
                    return CONTAINER if args & (TENSOR | CONTAINER) else CLEAN
                if func.id in ("min", "max", "sum", "abs", "pow", "round", "divmod", "sorted"):
                    return TENSOR if args & (TENSOR | CONTAINER) else CLEAN
                return CLEAN
            return CLEAN
        if isinstance(func, ast.Attribute):
            recv = self.expr(func.value, scope)
            attr = func.attr
            if recv & TENSOR:
                if attr in P.TENSOR_META:
                    return CLEAN
                if attr in P.TENSOR_SPLITS:
                    return CONTAINER
                return TENSOR
            flags = CLEAN
            if recv & STATE and attr not in ("copy",):
                flags |= STATE
            if recv & CONTAINER:
                flags |= TENSOR if attr in ("get", "pop", "setdefault") else CONTAINER
            return flags
        return CLEAN

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
        return (CONTAINER if flags & (TENSOR | CONTAINER) else CLEAN) | (flags & STATE)

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
        return CLEAN

    def _e_JoinedStr(self, node: ast.JoinedStr, scope: Scope) -> int:
        return CLEAN

    def _e_NamedExpr(self, node: ast.NamedExpr, scope: Scope) -> int:
        return self.expr(node.value, scope)


def _element(flags: int) -> int:
    """Flags of an element taken out of a value with `flags` (iteration, unpacking)."""
    out = flags & STATE
    if flags & (TENSOR | CONTAINER):
        out |= TENSOR
    return out
