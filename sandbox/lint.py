"""Static gate for candidate files: what the Python around the kernels may do.

`lint_source` parses the candidate with `ast` and rejects, with a line and a one-line reason
that names the fix: a missing or mis-signed op function, no kernel or no launch, imports outside
the allowlist, PyTorch computing the result, monkeypatching, module-level caches, escape hatches
(eval, dunders, builtins that reach the interpreter's internals) and triton.language names that do
not exist. The policy is written down in sandbox/POLICY.md; the tables are in lint_policy.py and
the tensor-derivation analysis in lint_scopes.py, lint_flow.py, lint_values.py and lint_calls.py;
lint_rules.py holds the expression rules.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from sandbox import lint_policy as P
from sandbox.lint_flow import MAX_ROUNDS, STATE, TENSOR, Flow
from sandbox.lint_pdl import pdl_issues
from sandbox.lint_rules import BUILTIN_NAMES, ExpressionRules
from sandbox.lint_scopes import Scope, ScopeBuilder

_MUTABLE_DEFAULTS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
_MAX_ISSUES = 60


@dataclass(frozen=True)
class LintIssue:
    line: int
    col: int
    code: str
    message: str            # one line: what, why, fix


@dataclass(frozen=True)
class LintReport:
    ok: bool
    issues: tuple[LintIssue, ...]
    kernels: tuple[str, ...]        # names of @triton.jit functions defined in the file
    launched: tuple[str, ...]       # kernels launched as kernel[grid](...)

    def summary(self) -> str:
        return "\n".join(f"line {i.line}: {i.message}" for i in self.issues)


def lint_source(source: str, op_name: str, arg_names: tuple[str, ...]) -> LintReport:
    """Check a candidate file against the policy in sandbox/POLICY.md."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        where = f" (column {e.offset})" if e.offset else ""
        text = (e.text or "").strip()
        issue = LintIssue(e.lineno or 1, e.offset or 0, "syntax",
                          f"the file does not parse: {e.msg}{where}" + (f" in `{text[:80]}`" if text else "")
                          + "; fix the Python syntax")
        return LintReport(False, (issue,), (), ())
    return _Linter(tree, op_name, tuple(arg_names)).run()


def _decorator_path(dec: ast.expr, aliases: dict[str, str]) -> str | None:
    node = dec.func if isinstance(dec, ast.Call) else dec
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id]] + attrs[::-1])
    return None


def _is_kernel_def(node: ast.AST, aliases: dict[str, str]) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        _decorator_path(d, aliases) == "triton.jit" for d in node.decorator_list)


def _mutates_in_place(node: ast.AugAssign) -> bool:
    """Augmented assignments that update a container in place rather than rebinding a number."""
    if isinstance(node.op, (ast.BitOr, ast.BitAnd, ast.BitXor, ast.Sub)):
        return not isinstance(node.value, ast.Constant)
    return isinstance(node.op, ast.Add) and isinstance(node.value, (ast.List, ast.Tuple, ast.ListComp, ast.Dict,
                                                                   ast.Set, ast.DictComp, ast.SetComp))


class _Linter(ExpressionRules, ast.NodeVisitor):
    """Statement-level rules, imports, definitions and the file's structure; the expression
    rules (names, attributes, calls, operators) come from ExpressionRules."""

    def __init__(self, tree: ast.Module, op_name: str, arg_names: tuple[str, ...]):
        self.tree = tree
        self.op_name = op_name
        self.arg_names = arg_names
        self.issues: list[LintIssue] = []
        self.seen: set[tuple[int, str]] = set()
        self.aliases: dict[str, str] = {}
        self.parents: dict[int, ast.AST] = {}
        self.launches: list[tuple[str, Scope]] = []
        self.rejected_aliases: set[str] = set()     # reported at the import; uses are not re-reported
        self.scope_stack: list[Scope] = []

    # ---------------------------------------------------------------- driver
    def run(self) -> LintReport:
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
        self._collect_imports()
        kernel_defs = [n for n in self.tree.body if _is_kernel_def(n, self.aliases)]
        self.kernels = tuple(n.name for n in kernel_defs)
        self.kernel_names = set(self.kernels)
        op_defs = [n for n in self.tree.body
                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == self.op_name]
        op_def = op_defs[0] if op_defs else None
        self.builder = ScopeBuilder(set(kernel_defs), op_def)
        self.root = self.builder.build(self.tree)
        self.flow = Flow(self.builder, self.root, self.aliases, self.kernel_names)
        self.op_scope = self.builder.scopes.get(id(op_def)) if op_def is not None else None
        self.flow.run(self.op_scope)
        if not self.flow.converged:
            self.add(None, "call", f"the tensor-derivation analysis did not settle in {MAX_ROUNDS} rounds (helpers "
                                   "calling helpers too deeply); flatten the launcher's helper chain")
        self.scope_stack = [self.root]
        for stmt in self.tree.body:
            self.visit(stmt)
        for node, message in pdl_issues(self.tree, {n.name: n for n in kernel_defs}, self.parents,
                                        lambda e: _decorator_path(e, self.aliases)):
            self.add(node, "pdl", message)
        self._check_structure(op_defs)
        issues = sorted(self.issues, key=lambda i: (i.line, i.col))[:_MAX_ISSUES]
        launched = tuple(dict.fromkeys(name for name, _ in self.launches))
        return LintReport(not issues, tuple(issues), self.kernels, launched)

    def add(self, node: ast.AST | None, code: str, message: str) -> None:
        line = getattr(node, "lineno", 1) if node is not None else 1
        col = getattr(node, "col_offset", -1) + 1 if node is not None else 0
        if (line, code) in self.seen:
            return
        self.seen.add((line, code))
        self.issues.append(LintIssue(line, col, code, message))

    @property
    def scope(self) -> Scope:
        return self.scope_stack[-1]

    def in_kernel(self) -> bool:
        return any(s.kind == "kernel" for s in self.scope_stack)

    def at_module_level(self) -> bool:
        return all(s.kind in ("module", "comprehension") for s in self.scope_stack)

    def taint(self, node: ast.expr | None) -> int:
        return self.flow.expr(node, self.scope)

    # ---------------------------------------------------------------- imports
    def _collect_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        root = a.name.split(".")[0]
                        self.aliases[root] = root
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name != "*":
                        self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def _import_context_ok(self, node: ast.AST) -> bool:
        if self.scope is not self.root:
            self.add(node, "import", "imports belong at the top of the file (module level), where the lint "
                                     "can see every name they bind")
            return False
        for a in node.names:
            if (a.asname or a.name.split(".")[0]) in BUILTIN_NAMES:
                self.add(node, "escape", f"import ... as {a.asname or a.name} rebinds a Python builtin; choose "
                                         "another name")
        return True

    def visit_Import(self, node: ast.Import) -> None:
        if not self._import_context_ok(node):
            return
        for a in node.names:
            bound = a.asname or a.name.split(".")[0]
            if not P.import_allowed(a.name):
                self.add(node, "import", f"import {a.name}: not allowed in a candidate; {P.IMPORT_HINT}")
                if a.asname or "." not in a.name:
                    self.rejected_aliases.add(bound)
            elif a.name.startswith("triton.language."):
                self._check_path(node, a.name, a.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if not self._import_context_ok(node):
            return
        if node.level or not node.module:
            self.add(node, "import", "relative imports are not allowed: a candidate is one self-contained file")
            return
        if not P.import_allowed(node.module):
            self.add(node, "import", f"from {node.module} import ...: not allowed in a candidate; {P.IMPORT_HINT}")
            self.rejected_aliases.update(a.asname or a.name for a in node.names)
            return
        for a in node.names:
            if a.name == "*":
                self.add(node, "import", f"from {node.module} import *: star imports hide which names are "
                                         "used; import the module (import triton.language as tl)")
                continue
            if node.module != "__future__":
                if self._check_path(node, f"{node.module}.{a.name}", f"{node.module}.{a.name}") == "reject":
                    self.rejected_aliases.add(a.asname or a.name)

    # ---------------------------------------------------------------- paths through modules
    def _check_path(self, node: ast.AST, path: str, shown: str) -> str:
        """Walk a dotted path prefix by prefix; report the first rejected prefix."""
        return self._walk_path(node, path, shown)[0]

    def _walk_path(self, node: ast.AST, path: str, shown: str) -> tuple[str, int]:
        """(verdict, number of path parts the verdict covers): parts after an allowed leaf are
        attributes of a library object (torch.Tensor.sum), checked like any attribute."""
        parts = path.split(".")
        shown_parts = shown.split(".")
        offset = len(parts) - len(shown_parts)
        for i in range(max(1, offset + 1), len(parts) + 1):
            verdict, code, message = P.path_verdict(".".join(parts[:i]), ".".join(shown_parts[:i - offset]))
            if verdict == "reject":
                self.add(node, code, message)
                return "reject", i
            if verdict == P.ALLOW:
                return P.ALLOW, i
        return P.NAMESPACE, len(parts)

    def _chain(self, node: ast.Attribute) -> tuple[ast.Name | None, list[str]]:
        attrs: list[str] = []
        cur: ast.expr = node
        while isinstance(cur, ast.Attribute):
            attrs.append(cur.attr)
            cur = cur.value
        return (cur if isinstance(cur, ast.Name) else None), attrs[::-1]

    def _is_module_alias(self, name: str) -> bool:
        home = self.scope.lookup(name)
        return name in self.aliases and (home is None or home is self.root)

    # ---------------------------------------------------------------- definitions
    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        is_kernel = not isinstance(node, ast.Lambda) and node.name in self.kernel_names and self.scope is self.root
        if isinstance(node, ast.AsyncFunctionDef):
            self.add(node, "escape", f"async def {node.name}: coroutines are not allowed; write a plain def")
        if not isinstance(node, ast.Lambda):
            nested_kernel = _is_kernel_def(node, self.aliases) and self.scope is not self.root
            if nested_kernel:
                self.add(node, "kernel-scope", f"@triton.jit {node.name} is defined inside a function; define "
                                               "kernels at module level (a nested kernel recompiles every call)")
            for dec in node.decorator_list:
                self._check_decorator(dec, node, is_kernel or nested_kernel)
            if self.scope is self.root and node.name in BUILTIN_NAMES:
                self.add(node, "escape", f"def {node.name} rebinds a Python builtin; choose another name")
            for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
                if a.annotation is not None:
                    self.visit(a.annotation)
            if node.returns is not None:
                self.visit(node.returns)
        every = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        for a in every + [a for a in (node.args.vararg, node.args.kwarg) if a is not None]:
            self._check_binding_name(a, a.arg)
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            if isinstance(default, _MUTABLE_DEFAULTS) or (
                    isinstance(default, ast.Call) and isinstance(default.func, ast.Name)
                    and default.func.id in ("dict", "list", "set")):
                self.add(default, "global-state", "a mutable default argument persists across calls (a hidden "
                                                  "cache); use None and build the value inside the function")
            self.visit(default)
        self.scope_stack.append(self.builder.scopes[id(node)])
        if isinstance(node, ast.Lambda):
            self.visit(node.body)
        else:
            for stmt in node.body:
                self.visit(stmt)
        self.scope_stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_def(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_def(node)

    def _check_decorator(self, dec: ast.expr, fn: ast.AST, is_kernel: bool) -> None:
        before = len(self.issues)
        self.visit(dec)
        if len(self.issues) > before:
            return
        path = _decorator_path(dec, self.aliases)
        allowed = P.KERNEL_DECORATORS if is_kernel else {"triton.constexpr_function"}
        if path not in allowed:
            what = "kernels take only @triton.jit, @triton.autotune and @triton.heuristics" if is_kernel else \
                "launcher functions take no decorators (they can wrap or cache the function); call helpers explicitly"
            self.add(dec, "decorator", f"decorator {ast.unparse(dec)[:60]} is not allowed: {what}")
        if path == "triton.autotune" and isinstance(dec, ast.Call):
            for kw in dec.keywords:
                if kw.arg == "do_bench":
                    self.add(kw.value, "triton-api", "triton.autotune(do_bench=...) replaces the benchmark timer; "
                                                     "leave timing to triton and the harness")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.add(node, "class", f"class {node.name}: classes are not allowed (they can hold state across calls "
                                "and override dunder methods); write plain functions")

    def _visit_comprehension(self, node: ast.AST) -> None:
        scope = self.builder.scopes[id(node)]
        self.scope_stack.append(scope)
        for gen in node.generators:
            self.visit(gen.iter)
            if not self.in_kernel() and self.taint(gen.iter) & TENSOR:
                self.add(gen.iter, "torch-compute", "iterating over a tensor in Python reads it element by "
                                                    "element; loop inside the kernel instead")
            self.visit(gen.target)
            for cond in gen.ifs:
                self._check_truth(cond)
                self.visit(cond)
        if isinstance(node, ast.DictComp):
            self.visit(node.key)
            self.visit(node.value)
        else:
            self.visit(node.elt)
        self.scope_stack.pop()

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comprehension

    # ---------------------------------------------------------------- statements
    def visit_Global(self, node: ast.Global) -> None:
        self.add(node, "global-state", f"global {', '.join(node.names)}: rebinding module-level names from a "
                                       "function keeps state across calls (a result cache); use local variables")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.add(node, "global-state", f"nonlocal {', '.join(node.names)}: closures that rebind outer names keep "
                                       "state across calls; use local variables")

    def visit_For(self, node: ast.For) -> None:
        if not self.in_kernel() and self.taint(node.iter) & TENSOR:
            self.add(node.iter, "torch-compute", "iterating over a tensor in Python reads it element by element; "
                                                 "loop inside the kernel instead")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if not self.in_kernel() and (self.taint(node.target) | self.taint(node.value)) & TENSOR:
            self.add(node, "torch-compute", f"`{ast.unparse(node)[:60]}` updates a tensor with PyTorch arithmetic; "
                                            "compute it inside the kernel")
        elif (not self.in_kernel() and not self.at_module_level() and isinstance(node.target, ast.Name)
              and self.taint(node.target) & STATE and _mutates_in_place(node)):
            # `store |= {...}` / `store += [...]` mutate a dict, set or list in place: through a parameter
            # whose default is module-level state, that is a cache across calls. (`n += 1` on an int read
            # from CONFIGS only rebinds a local and stays allowed.)
            self.add(node, "global-state", f"`{ast.unparse(node)[:60]}` updates module-level state in place from "
                                           "a function (a cache across calls); keep per-call data in locals")
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        for handler in node.handlers:
            caught = handler.type
            names = [caught] if not isinstance(caught, ast.Tuple) else caught.elts
            if caught is None or any(isinstance(n, ast.Name) and n.id in P.BASE_EXCEPTIONS for n in names):
                self.add(handler, "except", "catching everything (bare except, BaseException, SystemExit, "
                                            "KeyboardInterrupt) swallows the harness's timeouts and exits; "
                                            "catch specific Exception subclasses")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_Await(self, node: ast.Await) -> None:
        self.add(node, "escape", "await: coroutines are not allowed in a candidate")
        self.generic_visit(node)

    # ---------------------------------------------------------------- structure
    def _check_structure(self, op_defs: list[ast.AST]) -> None:
        expected = f"{self.op_name}({', '.join(self.arg_names)})"
        if not op_defs:
            self.add(None, "missing-op", f"no module-level function {self.op_name}: define def {expected} that "
                                         "launches your kernels and returns the output")
        else:
            op = op_defs[0]
            if len(op_defs) > 1:
                self.add(op_defs[1], "missing-op", f"{self.op_name} is defined {len(op_defs)} times; keep one")
            args = op.args
            names = tuple(a.arg for a in args.posonlyargs + args.args)
            extra = args.vararg or args.kwarg or args.kwonlyargs
            if names != self.arg_names or extra:
                found = ast.unparse(args)
                self.add(op, "signature", f"{self.op_name} must take exactly ({', '.join(self.arg_names)}) in this "
                                          f"order (defaults are allowed); found ({found}): rename or reorder the "
                                          "parameters")
            if op.name in self.kernel_names:
                self.add(op, "signature", f"{self.op_name} must be a plain Python launcher, not a @triton.jit kernel")
        if not self.kernels:
            self.add(None, "no-kernel", "no @triton.jit kernel is defined: compute the result in a @triton.jit "
                                        "function and launch it as kernel[grid](...)")
        elif not self.launches:
            self.add(None, "no-launch", f"no kernel is launched: call {self.kernels[0]}[grid](...) from "
                                        f"{self.op_name}")
        elif self.op_scope is not None and not self._op_reaches_launch():
            self.add(op_defs[0], "no-launch", f"{self.op_name} never launches a kernel (directly or through the "
                                              "file's helpers); the result must come from kernel[grid](...)")

    def _owner(self, scope: Scope) -> Scope:
        while scope.kind in ("comprehension", "lambda") and scope.parent is not None and not scope.name:
            scope = scope.parent
        return scope

    def _op_reaches_launch(self) -> bool:
        reached = {id(self.op_scope)}
        frontier = [self.op_scope]
        edges: list[tuple[Scope, Scope]] = []
        for name_node, site in self.builder.refs:
            fn = self.flow.host_function(name_node.id, site)
            if fn is not None:
                edges.append((self._owner(site), fn))
        while frontier:
            cur = frontier.pop()
            for src, dst in edges:
                if src is cur and id(dst) not in reached:
                    reached.add(id(dst))
                    frontier.append(dst)
        return any(id(self._owner(site)) in reached for _, site in self.launches)
