"""Python scopes of a candidate file, as the lint needs them.

One pass builds a Scope per module, function, lambda and comprehension, with the names each
binds (Python's rules: a name assigned anywhere in a function is local to it; comprehension
targets are local to the comprehension; a walrus binds in the enclosing function), every
assignment as a (target, how, value) source, parameters and which have scalar defaults, return
expressions, call sites and references to the file's own functions. lint_flow.py runs the
tensor-derivation fixpoint over these; lint.py resolves names through them.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field


@dataclass(eq=False)
class Scope:
    node: ast.AST
    kind: str                       # module | function | kernel | lambda | comprehension
    parent: "Scope | None"
    name: str = ""
    locals: set[str] = field(default_factory=set)
    # (target, how, value): how is "value" (target = value), "iter" (for target in value), "aug",
    # "unknown" (except ... as target, match captures: counted as a tensor)
    sources: list[tuple[ast.expr, str, ast.expr]] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    posparams: list[str] = field(default_factory=list)          # positional-or-keyword, in order
    kwonly: list[str] = field(default_factory=list)
    vararg: str | None = None
    kwarg: str | None = None
    scalar_params: set[str] = field(default_factory=set)
    defaults: dict[str, ast.expr] = field(default_factory=dict)      # parameter -> default expression
    returns: list[ast.expr] = field(default_factory=list)
    yields: list[ast.expr] = field(default_factory=list)         # `yield v` values; `yield from xs` iterables
    functions: dict[str, "Scope"] = field(default_factory=dict)   # host functions defined here
    state_names: set[str] = field(default_factory=set)           # module scope: plain variables

    def lookup(self, name: str) -> "Scope | None":
        scope: Scope | None = self
        while scope is not None:
            if name in scope.locals:
                return scope
            scope = scope.parent
        return None

    def function_scope(self) -> "Scope":
        """The nearest scope that is not a comprehension (where a walrus binds)."""
        scope = self
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        return scope


def is_scalar_default(node: ast.expr | None) -> bool:
    if isinstance(node, ast.Constant):
        return True
    return isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)


class ScopeBuilder(ast.NodeVisitor):
    """One pass over the module: scopes, bindings, call sites and function references."""

    def __init__(self, kernel_defs: set[ast.AST], op_def: ast.AST | None):
        self.kernel_defs = kernel_defs
        self.op_def = op_def
        self.scopes: dict[int, Scope] = {}
        self.all: list[Scope] = []
        self.calls: list[tuple[ast.Call, Scope]] = []
        self.refs: list[tuple[ast.Name, Scope]] = []        # host-function names used as values
        self.stack: list[Scope] = []

    # -- helpers
    @property
    def cur(self) -> Scope:
        return self.stack[-1]

    def _new(self, node: ast.AST, kind: str, name: str = "") -> Scope:
        scope = Scope(node, kind, self.stack[-1] if self.stack else None, name)
        self.scopes[id(node)] = scope
        self.all.append(scope)
        return scope

    def _bind_target(self, target: ast.expr, scope: Scope) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                scope.locals.add(node.id)

    def build(self, tree: ast.Module) -> Scope:
        root = self._new(tree, "module")
        self.stack.append(root)
        for stmt in tree.body:
            self.visit(stmt)
        self.stack.pop()
        return root

    # -- scopes
    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, name: str) -> None:
        outer = self.cur
        for dec in getattr(node, "decorator_list", []):
            self.visit(dec)
        args = node.args
        for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
            self.visit(default)
        if not isinstance(node, ast.Lambda):
            for a in args.posonlyargs + args.args + args.kwonlyargs:
                if a.annotation is not None:
                    self.visit(a.annotation)
            if node.returns is not None:
                self.visit(node.returns)
        kind = "kernel" if node in self.kernel_defs else ("lambda" if isinstance(node, ast.Lambda) else "function")
        scope = self._new(node, kind, name)
        every = args.posonlyargs + args.args + args.kwonlyargs
        scope.params = [a.arg for a in every]
        scope.posparams = [a.arg for a in args.posonlyargs + args.args]
        scope.kwonly = [a.arg for a in args.kwonlyargs]
        if args.vararg:
            scope.params.append(args.vararg.arg)
            scope.vararg = args.vararg.arg
        if args.kwarg:
            scope.params.append(args.kwarg.arg)
            scope.kwarg = args.kwarg.arg
        scope.locals.update(scope.params)
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for a, default in pairs:
            scope.defaults[a.arg] = default
            if is_scalar_default(default):
                scope.scalar_params.add(a.arg)
        if name and kind in ("function", "lambda"):
            outer.functions[name] = scope
        self.stack.append(scope)
        if isinstance(node, ast.Lambda):
            scope.returns.append(node.body)
            self.visit(node.body)
        else:
            for stmt in node.body:
                self.visit(stmt)
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.cur.locals.add(node.name)
        self._visit_function(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_function(node, "")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.cur.locals.add(node.name)      # rejected by the checker; bodies are not analysed

    def _visit_comprehension(self, node: ast.AST) -> None:
        scope = self._new(node, "comprehension")
        self.stack.append(scope)
        for gen in node.generators:
            self.visit(gen.iter)
            self._bind_target(gen.target, scope)
            scope.sources.append((gen.target, "iter", gen.iter))
            for cond in gen.ifs:
                self.visit(cond)
        if isinstance(node, ast.DictComp):
            self.visit(node.key)
            self.visit(node.value)
        else:
            self.visit(node.elt)
        self.stack.pop()

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comprehension

    # -- bindings
    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._bind_target(target, self.cur)
            self.cur.sources.append((target, "value", node.value))
            self.visit(target)
            if isinstance(target, ast.Name) and isinstance(node.value, ast.Lambda):
                lam = self.scopes.get(id(node.value))
                if lam is not None:
                    lam.name = target.id
                    self.cur.functions[target.id] = lam
        if self.cur.kind == "module":
            for target in node.targets:
                self._mark_state(target)

    def _mark_state(self, target: ast.expr) -> None:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                self.stack[0].state_names.add(n.id)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self.cur.sources.append((node.target, "value", node.value))
        self._bind_target(node.target, self.cur)
        self.visit(node.annotation)
        self.visit(node.target)
        if self.cur.kind == "module":
            self._mark_state(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        self._bind_target(node.target, self.cur)
        self.cur.sources.append((node.target, "aug", node.value))
        self.visit(node.target)
        if self.cur.kind == "module":
            self._mark_state(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self._bind_target(node.target, self.cur)
        self.cur.sources.append((node.target, "iter", node.iter))
        if self.cur.kind == "module":
            self._mark_state(node.target)
        for stmt in node.body + node.orelse:
            self.visit(stmt)
        self.visit(node.target)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        self.visit(node.context_expr)
        if node.optional_vars is not None:
            self._bind_target(node.optional_vars, self.cur)
            self.cur.sources.append((node.optional_vars, "value", node.context_expr))
            self.visit(node.optional_vars)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        scope = self.cur.function_scope()
        scope.locals.add(node.target.id)
        scope.sources.append((node.target, "value", node.value))

    def _bind_unknown(self, name: str) -> None:
        """A name bound to a value the analysis cannot trace (a caught exception may carry a tensor in
        its args; a match capture is any part of the subject): counted as a tensor."""
        self.cur.locals.add(name)
        self.cur.sources.append((ast.Name(id=name, ctx=ast.Store()), "unknown", ast.Constant(None)))

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:      # clean: a tensor can enter an exception only through a constructor the lint rejects
            self.cur.locals.add(node.name)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.cur.locals.add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self.cur.locals.add(alias.asname or alias.name)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._bind_target(target, self.cur)
            self.visit(target)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.name:
            self._bind_unknown(node.name)
        self.generic_visit(node)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self._bind_unknown(node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self._bind_unknown(node.rest)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        pass    # rejected by the checker

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.cur.function_scope().returns.append(node.value)
            self.visit(node.value)

    def visit_Yield(self, node: ast.Yield) -> None:
        if node.value is not None:
            self.cur.function_scope().yields.append(node.value)
        self.generic_visit(node)

    def visit_YieldFrom(self, node: ast.YieldFrom) -> None:
        self.cur.function_scope().yields.append(node.value)
        self.generic_visit(node)

    # -- uses
    def visit_Call(self, node: ast.Call) -> None:
        self.calls.append((node, self.cur))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.refs.append((node, self.cur))
