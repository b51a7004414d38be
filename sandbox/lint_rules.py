"""Expression rules of the lint: names, attributes, calls, operators, subscripts.

A mixin for sandbox.lint._Linter, which provides `add`, `scope`, `root`, `flow`, `aliases`,
`kernel_names`, `parents`, `launches`, `rejected_aliases`, `in_kernel()`, `at_module_level()`,
`taint()`, `_walk_path()`, `_check_path()`, `_chain()` and `_is_module_alias()`. Host code
(outside @triton.jit kernels) gets the PyTorch rules; kernels get only the name rules.
"""
from __future__ import annotations

import ast
import builtins
import string

from sandbox import lint_policy as P
from sandbox.lint_calls import Callee, unresolved_message
from sandbox.lint_flow import CONTAINER, STATE, TENSOR

BUILTIN_NAMES = frozenset(dir(builtins))
# Attributes of triton's JIT/autotuner objects: reading them reaches compiled-kernel caches.
_JIT_INTERNALS = frozenset({"fn", "cache", "device_caches", "run", "warmup", "src", "used_global_vals",
                            "params", "pre_run_hooks", "add_pre_run_hook", "configs", "best_config",
                            "cache_key", "preload", "rewrite", "rewritten_fn", "kernel_cache", "bench",
                            "create_binder", "get_capture_scope", "parse", "is_gluon", "repr", "signature",
                            "arg_names", "do_not_specialize", "kernel_decorators", "launch_metadata"})


class ExpressionRules:

    # ---------------------------------------------------------------- names
    def _check_binding_name(self, node: ast.AST, name: str) -> None:
        if name in P.HARD_BANNED:
            self.add(node, P.HARD_BANNED[name], f"the name {name} is reserved: candidates may not use or rebind it")
        elif name in self.aliases:
            self.add(node, "monkeypatch", f"{name} shadows an imported name; use a different parameter name")

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name.startswith("__") and name.endswith("__"):
            if name == "__name__":
                msg = ("__name__: remove the `if __name__ == \"__main__\":` block and other module introspection; "
                       f"the harness calls {self.op_name}(...) itself")
            else:
                msg = f"{name}: dunder names reach the interpreter's internals; not allowed in a candidate"
            self.add(node, "escape", msg)
            return
        if name in P.HARD_BANNED:
            code = P.HARD_BANNED[name]
            why = {"io": "file and console I/O", "exit": "ends the process (the harness decides outcomes)",
                   "monkeypatch": "sets attributes by name (monkeypatching)"}.get(
                code, "runs or reaches code the lint cannot see")
            self.add(node, code, f"{name}: {why}; not allowed in a candidate")
            return
        home = self.scope.lookup(name)
        if name == "getattr" and home is None:
            parent = self.parents.get(id(node))
            if not (isinstance(parent, ast.Call) and parent.func is node):
                self.add(node, "escape", "getattr used as a value can reach anything; write obj.name")
            return
        if isinstance(node.ctx, ast.Load):
            if home is None:
                if name in BUILTIN_NAMES:
                    if name in P.ALLOWED_BUILTINS and not self._builtin_use_ok(node, name):
                        self.add(node, "call", f"builtin {name} used as a value (an alias, a table entry, key={name}): "
                                               f"the lint follows builtins only where they are called; write "
                                               f"{name}(...) where it is needed")
                    if name not in P.ALLOWED_BUILTINS:
                        code = P.BANNED_BUILTIN_CODES.get(name, "builtin")
                        extra = " (id/hash key output caches on object identity)" if code == "data-ptr" else ""
                        self.add(node, code, f"builtin {name}() is not allowed in a candidate{extra}; "
                                             "allowed: " + ", ".join(sorted(n for n in P.ALLOWED_BUILTINS
                                                                             if n[0].islower())))
                else:
                    self.add(node, "undefined-name", f"name {name} is not defined in this file (a missing import "
                                                     "or a typo?)")
                return
            if home is self.root and name in self.aliases and name not in self.rejected_aliases:
                parent = self.parents.get(id(node))
                if not (isinstance(parent, ast.Attribute) and parent.value is node):
                    if self._check_path(node, self.aliases[name], name) == P.NAMESPACE:
                        self.add(node, "escape", f"{name} is a module: call its functions ({name}.<name>) but do "
                                                 "not store or pass the module itself")
            holds_kernel = (home is self.root and name in self.kernel_names) or \
                (home is not None and (id(home), name) in self.flow.kernel_params)     # a launch helper's kernel
            if holds_kernel and not self.in_kernel():
                parent = self.parents.get(id(node))
                call = self.parents.get(id(parent)) if isinstance(parent, ast.keyword) else parent
                passed = isinstance(call, ast.Call) and call.func is not node and \
                    self.flow.resolve(call.func, self.scope).kind in ("host", "partial")
                ok = (isinstance(parent, ast.Subscript) and parent.value is node) or passed or \
                    (isinstance(parent, ast.Call) and parent.func is node)      # K(...): reported as `call`
                if not ok:
                    self.add(node, "kernel-attr", f"kernel {name} may only be launched ({name}[grid](...)) or "
                                                  "passed to one of this file's launch helpers; do not store or "
                                                  "inspect it")
        else:
            if name in self.aliases and isinstance(node.ctx, ast.Store):
                self.add(node, "monkeypatch", f"assignment to {name} rebinds an imported module or name; "
                                              "use a different variable name")
            elif self.scope is self.root and name in BUILTIN_NAMES:
                self.add(node, "escape", f"module-level {name} rebinds a Python builtin; choose another name")

    def _builtin_use_ok(self, node: ast.Name, name: str) -> bool:
        """Builtins are called; exception classes are also raised and caught, and types are
        isinstance's second argument."""
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Call) and parent.func is node:
            return True
        if name[0].isupper():
            return True             # exception classes, NotImplemented, Ellipsis
        if self._in_annotation(node):
            return True
        if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node and \
                self.flow.module_path(parent.func, self.scope) == "typing.cast":
            return True
        child = node
        while isinstance(parent, ast.Tuple):
            child, parent = parent, self.parents.get(id(parent))
        return (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "isinstance"
                and len(parent.args) == 2 and parent.args[1] is child)

    def _in_annotation(self, node: ast.AST) -> bool:
        child, parent = node, self.parents.get(id(node))
        while parent is not None and not isinstance(parent, ast.stmt):
            if isinstance(parent, ast.arg) and parent.annotation is child:
                return True
            child, parent = parent, self.parents.get(id(parent))
        return (isinstance(parent, ast.AnnAssign) and parent.annotation is child) or \
            (isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and parent.returns is child)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._check_binding_name(node, node.name)
        self.generic_visit(node)

    # ---------------------------------------------------------------- attributes
    def visit_Attribute(self, node: ast.Attribute) -> None:
        root, attrs = self._chain(node)
        parent = self.parents.get(id(node))
        outermost = not (isinstance(parent, ast.Attribute) and parent.value is node)
        if root is not None and self._is_module_alias(root.id):
            if not outermost:
                return
            shown = ".".join([root.id] + attrs)
            path = ".".join([self.aliases[root.id]] + attrs)
            if self.in_kernel() and path.split(".")[0] == "torch":
                self.add(node, "torch-in-kernel", f"{shown} inside a @triton.jit kernel: kernels use triton.language "
                                                  "(tl.*) only")
                return
            if root.id in self.rejected_aliases:
                return
            verdict, covered = self._walk_path(node, path, shown)
            if verdict == P.ALLOW:
                for attr in path.split(".")[covered:]:
                    if attr.startswith("_"):
                        self.add(node, "escape", f"{shown}: private and dunder attributes are internals; not allowed")
                    elif attr in _JIT_INTERNALS:
                        self.add(node, "kernel-attr", f"{shown}: .{attr} is triton JIT machinery; not for candidates")
                    elif not self.in_kernel():
                        verdict_attr = P.tensor_attribute_verdict(attr, shown)
                        if verdict_attr is not None:
                            self.add(node, *verdict_attr)
            if verdict == P.NAMESPACE and not (isinstance(parent, ast.Call) and parent.func is node):
                self.add(node, "escape", f"{shown} is a module: call its functions but do not store or pass "
                                         "the module itself")
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                self.add(node, "monkeypatch", f"assignment to {shown} patches a library (monkeypatching); "
                                              "candidates may not change imported modules")
            return
        attr = node.attr
        shown = ast.unparse(node)[:60]
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.add(node, "monkeypatch", f"assignment to attribute {shown}: candidates may not set or delete "
                                          "attributes (monkeypatching, hidden state); use local variables")
        if attr.startswith("__") and attr.endswith("__"):
            self.add(node, "escape", f"{shown}: dunder attributes reach the interpreter's internals; not allowed")
        elif attr.startswith("_"):
            self.add(node, "escape", f"{shown}: private attributes are internals; use the public API")
        elif not self.in_kernel():
            self._check_host_attribute(node, node.value, attr, shown)
        self.generic_visit(node)

    def _check_host_attribute(self, node: ast.AST, receiver: ast.expr, attr: str, shown: str) -> None:
        if isinstance(receiver, ast.Call) and isinstance(receiver.func, (ast.Name, ast.Attribute)):
            path = self.flow.module_path(receiver.func, self.scope)
            if path is not None and path.startswith("torch.") and P.torch_call_kind(path) == "clean":
                return          # torch.finfo(...).max, torch.cuda.get_device_properties(...).name
        meta = receiver.func if isinstance(receiver, ast.Call) else receiver
        if isinstance(meta, ast.Attribute) and meta.attr in P.TENSOR_META:
            return              # x.device.type, x.dtype.itemsize: attributes of metadata, not of a tensor
        if isinstance(receiver, ast.Name):
            home = self.scope.lookup(receiver.id)
            if home is self.root and receiver.id in self.kernel_names:
                self.add(node, "kernel-attr", f"{shown}: kernels may only be launched as {receiver.id}[grid](...); "
                                              "their attributes hold triton's compiled-kernel caches")
                return
            if home is None and receiver.id in BUILTIN_NAMES:
                self.add(node, "escape", f"{shown}: attributes of builtins are not allowed; call methods on values")
                return
        if attr in _JIT_INTERNALS:
            self.add(node, "kernel-attr", f"{shown}: .{attr} is triton JIT/autotuner machinery; launch kernels as "
                                          "kernel[grid](...) and leave their internals alone")
            return
        verdict = P.tensor_attribute_verdict(attr, shown)
        if verdict is not None:
            self.add(node, *verdict)

    # ---------------------------------------------------------------- expressions
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        callee = None if self.in_kernel() else self.flow.resolve(func, self.scope)
        if callee is not None and callee.kind in ("launch", "partial"):
            kernels = _launched_kernels(callee)
            self.launches += [(k, self.scope) for k in kernels]
            if kernels and self.at_module_level():
                self.add(node, "module-level", f"{ast.unparse(func)[:40]}(...) at module level runs at import; "
                                               f"launch kernels inside {self.op_name}(...)")
        why = _unresolved_reason(callee) if callee is not None else None
        if why is not None:
            self.add(node, "call", unresolved_message(node, why))
        if isinstance(func, ast.Name) and func.id == "getattr" and self.scope.lookup("getattr") is None:
            self._check_getattr(node)
        elif callee is not None:
            self._check_host_call(node, callee)
        self.generic_visit(node)

    def _check_getattr(self, node: ast.Call) -> None:
        if len(node.args) < 2 or not (isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            self.add(node, "escape", "getattr with a computed name can reach anything; write the attribute "
                                     "out (obj.name)")
            return
        obj, attr = node.args[0], node.args[1].value
        shown = f"getattr({ast.unparse(obj)[:30]}, {attr!r})"
        if isinstance(obj, (ast.Name, ast.Attribute)):
            root, _ = self._chain(obj) if isinstance(obj, ast.Attribute) else (obj, [])
            if root is not None and self._is_module_alias(root.id):
                self.add(node, "escape", f"{shown}: getattr on a module bypasses the import policy; write "
                                         "module.name")
                return
        if attr.startswith("_"):
            self.add(node, "escape", f"{shown}: private and dunder attributes are internals; not allowed")
        elif not self.in_kernel():
            self._check_host_attribute(node, obj, attr, shown)

    def _check_host_call(self, node: ast.Call, callee: Callee) -> None:
        func = node.func
        args = list(node.args) + [k.value for k in node.keywords]
        arg_taint = 0
        for a in args:
            arg_taint |= self.taint(a)
        path = callee.path if callee.kind == "module" else None
        if path is not None:
            root = path.split(".")[0]
            if path == "torch.Tensor":
                self.add(node, "torch-compute", "torch.Tensor(...) builds a tensor from host data (or re-wraps one); "
                                                "allocate with torch.empty/empty_like and fill it in the kernel")
            for i, a in enumerate(args):
                position = i if i < len(node.args) and not isinstance(a, ast.Starred) else None
                if self.taint(a) & (TENSOR | CONTAINER) and not P.tensor_argument_allowed(path, position):
                    self.add(node, "torch-compute", f"{ast.unparse(func)[:40]}(...) receives a tensor "
                                                    f"(`{ast.unparse(a)[:30]}`): library calls may take tensors only "
                                                    "as the model of an *_like allocation, a TensorDescriptor's base, "
                                                    "or through functools.partial/typing.cast; pass sizes "
                                                    "(t.shape, t.numel()) or compute it in the kernel")
                    break
            if self.at_module_level() and root == "torch" and not self._is_decorator(node):
                self.add(node, "module-level", f"{ast.unparse(func)}(...) at module level runs at import; allocate "
                                               f"and query devices inside {self.op_name}(...)")
            if (path in ("triton.cdiv", "triton.next_power_of_2") or root == "math") and arg_taint & (TENSOR | CONTAINER):
                self.add(node, "torch-compute", f"{ast.unparse(func)}(...) on a tensor computes with PyTorch; pass "
                                                "sizes (x.shape[0], x.numel()) instead")
            return
        if isinstance(func, ast.Name) and self.scope.lookup(func.id) is None and func.id in P.ALLOWED_BUILTINS:
            name = func.id
            if name in P.TENSOR_SAFE_BUILTINS:
                return
            if name in P.CONTAINER_SAFE_BUILTINS:
                if arg_taint & TENSOR:
                    self.add(node, "torch-compute", f"{name}(...) iterates over a tensor in Python; work on tensors "
                                                    "inside the kernel")
                return
            if arg_taint & (TENSOR | CONTAINER):
                if name in P.HOST_SYNC_BUILTINS:
                    self.add(node, "host-sync", f"{name}(...) of a tensor reads its values on the host (a device "
                                                "sync that breaks CUDA graphs); print or convert sizes, not tensors")
                else:
                    self.add(node, "torch-compute", f"{name}(...) over tensors computes with PyTorch in Python; "
                                                    "compute it inside the kernel")
            return
        if callee.kind == "method":
            self._check_method_arguments(node, func, args, arg_taint)
        if isinstance(func, ast.Attribute):
            if func.attr in ("format", "format_map") and isinstance(func.value, ast.Constant) and \
                    isinstance(func.value.value, str):
                self._check_format_string(node, func.value.value)
            if func.attr in P.MUTATING_METHODS and self.taint(func.value) & STATE:
                self.add(node, "global-state", f"{ast.unparse(func)[:50]}(...) changes module-level state from a "
                                               "function (a cache across calls); keep per-call data in locals")

    def _check_method_arguments(self, node: ast.Call, func: ast.Attribute, args: list[ast.expr], arg_taint: int) -> None:
        """A tensor handed to a method: views and metadata take sizes; other values' methods may only
        store or fetch it (list.append, dict.get); str.format, list.index ... would read or compare it."""
        shown = ast.unparse(func)[:40]
        if self.taint(func.value) & TENSOR:
            tensors = [a for a in args if self.taint(a) & TENSOR]
            model_only = func.attr.endswith("_as") and bool(node.args) and tensors == [node.args[0]]
            if tensors and not model_only:
                self.add(node, "torch-compute", f"{shown}(`{ast.unparse(tensors[0])[:30]}`) passes a tensor to a "
                                                "tensor method: view, allocation and metadata arguments are sizes "
                                                "(t.shape, t.stride(0)); only view_as/reshape_as/expand_as take a tensor")
        elif arg_taint & (TENSOR | CONTAINER) and func.attr not in P.CONTAINER_METHODS:
            self.add(node, "call", f"{shown}(...) passes a tensor to a method the lint does not know (on a value that "
                                   "is not a tensor): it may read or compare it; give tensors only to kernels, views, "
                                   "allocations and container methods (" + ", ".join(sorted(P.CONTAINER_METHODS)) + ")")

    def _is_decorator(self, node: ast.AST) -> bool:
        parent = self.parents.get(id(node))
        return isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) and node in parent.decorator_list

    def _check_format_string(self, node: ast.AST, text: str) -> None:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(text) if f]
        except ValueError:
            return
        if any("." in f or "[" in f for f in fields):
            self.add(node, "escape", "format fields with attribute or index access ({0.attr}) can read internals; "
                                     "use an f-string with plain expressions")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if not self.in_kernel():
            if isinstance(node.op, ast.MatMult):
                self.add(node, "torch-compute", f"`{ast.unparse(node)[:60]}`: @ multiplies matrices with PyTorch; "
                                                "use tl.dot inside your kernel")
            elif (self.taint(node.left) | self.taint(node.right)) & TENSOR:
                self.add(node, "torch-compute", f"`{ast.unparse(node)[:60]}` does arithmetic on tensors in Python; "
                                                "do it inside the kernel (launcher arithmetic is for sizes and grids)")
        self.generic_visit(node)

    def _check_truth(self, test: ast.expr | None) -> None:
        """`if t:`, `while t:`, `assert t`, `t and u`, `not t`: bool(tensor) reads it on the host."""
        if test is not None and not self.in_kernel() and self.taint(test) & TENSOR:
            self.add(test, "host-sync", f"`{ast.unparse(test)[:50]}` tests a tensor's truth in Python (bool(t) reads "
                                        "it on the host); test sizes, dtypes or `t is None`, or branch in the kernel")

    def visit_If(self, node: ast.If) -> None:
        self._check_truth(node.test)
        self.generic_visit(node)

    visit_While = visit_IfExp = visit_If

    def visit_Assert(self, node: ast.Assert) -> None:
        self._check_truth(node.test)
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        for value in node.values:
            self._check_truth(value)
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            self._check_truth(node.operand)
        if not self.in_kernel() and not isinstance(node.op, ast.Not) and self.taint(node.operand) & TENSOR:
            self.add(node, "torch-compute", f"`{ast.unparse(node)[:60]}` computes on a tensor in Python; do it "
                                            "inside the kernel")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if not self.in_kernel() and self.taint(node) & TENSOR:
            self.add(node, "torch-compute", f"`{ast.unparse(node)[:60]}` compares tensors in Python (a PyTorch op); "
                                            "compare sizes or dtypes, or do it inside the kernel")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if not self.in_kernel():
            base = self.taint(node.value)
            index = node.slice
            if isinstance(node.ctx, ast.Load):
                fancy = any(isinstance(n, (ast.List, ast.ListComp)) for n in ast.walk(index))
                if base & TENSOR and (self.taint(index) & (TENSOR | CONTAINER) or fancy):
                    self.add(node, "torch-compute", f"`{ast.unparse(node)[:60]}` indexes a tensor with a tensor or "
                                                    "list (a PyTorch gather); gather inside the kernel")
            else:
                if base & TENSOR and not base & STATE:
                    self.add(node, "torch-compute", f"`{ast.unparse(node)[:60]} = ...` writes into a tensor from "
                                                    "Python; write the output inside the kernel")
                if base & STATE and not self.at_module_level():
                    self.add(node, "global-state", f"`{ast.unparse(node)[:60]}` writes module-level state from a "
                                                   "function (a cache across calls); keep per-call data in locals")
        self.generic_visit(node)

    def visit_FormattedValue(self, node: ast.FormattedValue) -> None:
        if not self.in_kernel() and self.taint(node.value) & (TENSOR | CONTAINER):
            self.add(node, "host-sync", "formatting a tensor into a string reads its values on the host; format "
                                        "its .shape or .dtype instead")
        self.generic_visit(node)


def _launched_kernels(callee: Callee, depth: int = 0) -> list[str]:
    """Kernels a launch, or a functools.partial around a launch, runs."""
    if callee.kind == "launch":
        return list(callee.kernels)
    if callee.kind == "partial" and depth < 8:
        return [k for inner in callee.inner for k in _launched_kernels(inner, depth + 1)]
    return []


def _unresolved_reason(callee: Callee, depth: int = 0) -> str | None:
    """Why a call (or what a functools.partial wraps) cannot be resolved, or None."""
    if callee.kind == "unresolved":
        return callee.path
    if callee.kind == "partial" and depth < 8:
        for inner in callee.inner:
            why = _unresolved_reason(inner, depth + 1)
            if why is not None:
                return why
    return None
