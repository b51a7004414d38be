"""The tables behind sandbox/lint.py: what candidate code may import, call and touch.

Everything here is data plus small lookups over it; the AST walk lives in lint.py and
lint_rules.py, the scopes and tensor-derivation analysis in lint_scopes.py and lint_flow.py.
POLICY.md explains each rule with examples.
A verdict is `None` (allowed) or `(code, message)`; messages are one line: what, why, fix.
"""
from __future__ import annotations

import difflib
import functools
import importlib
import types

# --- imports ---------------------------------------------------------------------------------

ALLOWED_IMPORTS = ("torch", "triton", "triton.language", "math", "functools", "typing", "__future__",
                   "triton.tools.tensor_descriptor")
IMPORT_HINT = ("allowed imports: triton, triton.language (as tl), torch, math, functools, typing, "
               "__future__ (and triton.tools.tensor_descriptor for TMA descriptors)")


def import_allowed(module: str) -> bool:
    return module in ALLOWED_IMPORTS or module.startswith("triton.language.")


# --- torch ---------------------------------------------------------------------------------------

TORCH_ALLOC = frozenset({"empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full",
                         "full_like", "empty_strided"})
TORCH_META = frozenset({"Tensor", "Size", "dtype", "device", "finfo", "iinfo", "is_tensor",
                        "get_default_dtype"})
TORCH_DTYPES = frozenset({
    "float32", "float", "float16", "half", "bfloat16", "float64", "double", "int8", "int16", "short",
    "int32", "int", "int64", "long", "uint8", "uint16", "uint32", "uint64", "bool", "float8_e4m3fn",
    "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"})
# Device queries that neither time, synchronize nor change state: choosing a config by SM count
# or capability is honest work. Streams, events, synchronize and graphs are the harness's.
TORCH_CUDA_OK = frozenset({"current_device", "device", "is_available", "device_count",
                           "get_device_properties", "get_device_capability", "get_device_name"})
TORCH_ESCAPES = frozenset({"_C", "ops", "library", "compile", "_dynamo", "_inductor", "jit", "utils",
                           "hub", "load", "save", "backends", "autograd", "distributed",
                           "multiprocessing", "fx", "export", "overrides", "func", "classes",
                           "_ops", "_higher_order_ops", "set_default_device", "manual_seed",
                           "use_deterministic_algorithms", "profiler", "testing", "package"})
TORCH_ALLOWED_NAMES = TORCH_ALLOC | TORCH_META | TORCH_DTYPES

# --- triton --------------------------------------------------------------------------------------

TRITON_OK = frozenset({"jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2",
                       "set_allocator", "constexpr_function"})
TRITON_NAMESPACES = frozenset({"triton", "triton.tools", "triton.tools.tensor_descriptor"})
TRITON_HINT = ("candidates may use triton.jit, autotune, heuristics, Config, cdiv, next_power_of_2, "
               "constexpr_function, set_allocator, language and tools.tensor_descriptor")
KERNEL_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics"})

# Objects reachable from triton.language whose home is elsewhere in triton but which are plain enums.
TL_FOREIGN_OK = frozenset({"triton.language.PropagateNan"})
# Launch-time callbacks: functions given to these receive triton's dict of the kernel's real arguments.
# (triton.set_allocator's callback gets only sizes: lint_flow treats it apart.)
TRITON_CALLBACK_TAKERS = frozenset({"triton.Config", "triton.autotune", "triton.heuristics", "triton.jit"})

FUNCTOOLS_OK = frozenset({"partial", "reduce", "wraps"})
# typing: names that only annotate (and cast, which returns its argument). Not get_type_hints, which
# evaluates string annotations (arbitrary code), nor NamedTuple/TypedDict/Protocol (classes).
TYPING_OK = frozenset({"Any", "Optional", "Union", "Tuple", "List", "Dict", "Sequence", "Callable", "Iterable",
                       "Iterator", "Mapping", "Literal", "Final", "Type", "TYPE_CHECKING", "cast"})
FUNCTOOLS_CACHES = frozenset({"cache", "lru_cache", "cached_property", "cache_clear"})

# --- builtins ------------------------------------------------------------------------------------

ALLOWED_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "float", "frozenset", "int",
    "isinstance", "len", "list", "max", "min", "pow", "print", "range", "reversed", "round", "set",
    "slice", "sorted", "str", "sum", "tuple", "zip",
    "Exception", "ValueError", "TypeError", "RuntimeError", "AssertionError", "NotImplementedError",
    "KeyError", "IndexError", "ZeroDivisionError", "ArithmeticError", "OverflowError", "LookupError",
    "NotImplemented", "Ellipsis", "None", "True", "False"})
# Banned whatever the scope says: no candidate needs these names even as a local.
HARD_BANNED = {
    "eval": "escape", "exec": "escape", "compile": "escape", "__import__": "escape",
    "globals": "escape", "locals": "escape", "vars": "escape", "open": "io",
    "breakpoint": "escape", "setattr": "monkeypatch", "delattr": "monkeypatch", "exit": "exit",
    "quit": "exit", "memoryview": "escape", "help": "escape", "__builtins__": "escape",
}
BANNED_BUILTIN_CODES = {"id": "data-ptr", "hash": "data-ptr", "input": "io", "type": "escape", "object": "escape",
                        "super": "escape", "dir": "escape", "classmethod": "escape",
                        "staticmethod": "escape", "property": "escape", "callable": "escape",
                        "issubclass": "escape", "hasattr": "escape", "iter": "escape", "next": "escape",
                        "map": "builtin", "filter": "builtin", "repr": "builtin", "format": "builtin",
                        "SystemExit": "exit", "KeyboardInterrupt": "exit", "BaseException": "except",
                        "GeneratorExit": "except"}
BASE_EXCEPTIONS = frozenset({"BaseException", "SystemExit", "KeyboardInterrupt", "GeneratorExit"})
# Builtins that take tensors harmlessly; the others either iterate, compare or read them.
TENSOR_SAFE_BUILTINS = frozenset({"len", "isinstance"})
CONTAINER_SAFE_BUILTINS = frozenset({"list", "tuple", "zip", "enumerate", "reversed", "dict", "set",
                                     "frozenset"})
HOST_SYNC_BUILTINS = frozenset({"print", "str", "int", "float", "bool", "range", "any", "all"})

# --- tensor methods and attributes (host code) ---------------------------------------------------

TENSOR_VIEWS = frozenset({
    "view", "view_as", "reshape", "reshape_as", "transpose", "permute", "t", "contiguous", "unsqueeze",
    "squeeze", "expand", "expand_as", "as_strided", "narrow", "flatten", "unflatten", "movedim",
    "select", "swapaxes", "T", "mT", "new_empty", "new_zeros", "new_ones", "new_full",
    "new_empty_strided", "zero_", "fill_"})
TENSOR_SPLITS = frozenset({"split", "chunk", "unbind", "tensor_split"})
TENSOR_META = frozenset({
    "size", "stride", "numel", "nelement", "dim", "ndimension", "is_contiguous", "element_size",
    "storage_offset", "get_device", "is_floating_point", "is_complex", "shape", "dtype", "device",
    "ndim", "is_cuda", "layout", "itemsize", "nbytes", "requires_grad", "is_leaf"})
TENSOR_OK = TENSOR_VIEWS | TENSOR_SPLITS | TENSOR_META | {"index", "values"}
HOST_SYNC_METHODS = frozenset({"item", "tolist", "cpu", "cuda", "numpy", "synchronize", "record",
                               "elapsed_time", "wait_event", "wait_stream", "record_stream"})
DATA_PTR_ATTRS = frozenset({"data_ptr", "untyped_storage", "storage", "_cdata", "unsafe_chunk"})
MUTATING_METHODS = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "popitem",
                              "clear", "remove", "add", "discard", "sort", "reverse"})
# Used when torch cannot be imported: the most common ways to compute with a tensor.
_FALLBACK_TENSOR_ATTRS = frozenset({
    "sum", "mean", "max", "min", "exp", "log", "sigmoid", "softmax", "matmul", "mm", "bmm", "add",
    "sub", "mul", "div", "pow", "sqrt", "rsqrt", "abs", "to", "float", "half", "bfloat16", "double",
    "int", "long", "type", "clone", "copy_", "sort", "argsort", "topk", "cumsum", "where", "gather",
    "scatter", "index_select", "masked_fill", "clamp", "tanh", "relu", "silu", "norm", "var", "std",
    "prod", "any", "all", "item", "tolist", "cpu", "cuda", "numpy", "data_ptr", "storage",
    "untyped_storage", "bincount", "histc", "einsum", "addmm", "baddbmm", "lerp", "neg", "square"})


@functools.lru_cache(maxsize=1)
def tensor_attribute_names() -> frozenset[str]:
    """Every public attribute of torch.Tensor: a method call by one of these names in launcher
    code is a PyTorch op unless TENSOR_OK lists it."""
    try:
        import torch
        return frozenset(n for n in dir(torch.Tensor) if not n.startswith("__"))
    except Exception:  # torch missing or broken: the fallback still catches the usual suspects
        return _FALLBACK_TENSOR_ATTRS


def tensor_attribute_verdict(attr: str, shown: str) -> tuple[str, str] | None:
    """Host-code attribute `attr` on any non-module value (shown as `shown`)."""
    if attr in DATA_PTR_ATTRS:
        return ("data-ptr", f"{shown} reads a raw pointer or storage (the tool of pointer-keyed "
                            "output caches); pass the tensor itself to the kernel")
    if attr in HOST_SYNC_METHODS:
        return ("host-sync", f"{shown} moves data to the host or synchronizes the device, which breaks "
                             "CUDA-graph capture; keep values on the device and use them in the kernel")
    if attr in TENSOR_OK or attr not in tensor_attribute_names():
        return None
    if attr in ("sort", "add"):
        hint = "use sorted(...) or a local list for Python values; tensor work belongs in the kernel"
    elif attr in ("to", "float", "half", "bfloat16", "double", "int", "long", "type", "clone", "copy_"):
        hint = "cast or copy inside the kernel (tl.load(...).to(tl.float32), store in the output dtype)"
    else:
        hint = "compute it inside the @triton.jit kernel"
    return ("torch-compute", f"{shown} computes with PyTorch in the launcher; {hint} (launcher code may "
                             "only allocate, take views and read metadata)")


# --- dotted paths rooted at an imported module ---------------------------------------------------

ALLOW, NAMESPACE = "allow", "namespace"


@functools.lru_cache(maxsize=None)
def _module(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except Exception:
        return None


def _public_names(obj: object) -> list[str]:
    return [n for n in dir(obj) if not n.startswith("_")]


def _suggest(name: str, options, prefix: str) -> str:
    close = difflib.get_close_matches(name, list(options), n=3, cutoff=0.5)
    return ("did you mean " + " or ".join(f"{prefix}{c}" for c in close) + "?") if close else ""


def triton_version() -> str:
    mod = _module("triton")
    return getattr(mod, "__version__", "?") if mod else "?"


def tl_walk(path: list[str], shown_root: str) -> tuple[str, str | None, str | None]:
    """Walk `triton.language.<path...>` through the installed package.

    Returns (ALLOW | NAMESPACE, None, None) or ("reject", code, message). Stops at the first
    non-module object: attributes of a dtype or a function are not names of triton.language."""
    obj: object | None = _module("triton.language")
    if obj is None:
        return ALLOW, None, None
    dotted = "triton.language"
    shown = shown_root
    for name in path:
        if name.startswith("_"):
            return ("reject", "escape", f"{shown}.{name} is a private triton internal; use the public "
                                        "triton.language API")
        child = getattr(obj, name, None)
        if child is None and isinstance(obj, types.ModuleType):
            child = _module(f"{dotted}.{name}")
        if child is None:
            hint = _suggest(name, _public_names(obj), f"{shown}.")
            return ("reject", "tl-name",
                    f"{shown}.{name} does not exist in triton.language {triton_version()}"
                    + (f"; {hint}" if hint else "; check the name against the triton.language docs"))
        home = _home_module(child)
        if not (home.startswith("triton.language") or f"{dotted}.{name}" in TL_FOREIGN_OK):
            # triton.language modules import triton.runtime (the driver hands out torch.cuda), knobs, jit:
            # only objects defined by triton.language itself are the language
            return ("reject", "escape", f"{shown}.{name} is not part of the triton.language API (it is "
                                        f"{home or type(child).__name__}, imported there); use public tl.* names")
        obj, dotted, shown = child, f"{dotted}.{name}", f"{shown}.{name}"
        if not isinstance(obj, types.ModuleType):
            return ALLOW, None, None
    return NAMESPACE, None, None


def _home_module(obj: object) -> str:
    """Where an object reachable from triton.language comes from. Modules by name; functions and
    classes by __module__; JIT functions by their Python function; constants are triton's own.
    (triton.language.core imports builtins, inspect and knobs; triton.language.extra holds
    importlib machinery: none of that is the language.)"""
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    if isinstance(obj, (bool, int, float, str)):
        return "triton.language"
    inner = getattr(obj, "fn", None)
    if inner is not None and type(obj).__name__ in ("JITFunction", "InterpretedFunction"):
        return getattr(inner, "__module__", "") or ""
    if isinstance(obj, type) or callable(obj):
        return getattr(obj, "__module__", "") or ""
    return type(obj).__module__


def path_verdict(path: str, shown: str) -> tuple[str, str | None, str | None]:
    """Classify a fully resolved dotted path such as "torch.cuda.synchronize".

    Returns (ALLOW, None, None) for a usable object, (NAMESPACE, None, None) for a module the
    walk may continue into, or ("reject", code, message)."""
    parts = path.split(".")
    root = parts[0]
    if root == "torch":
        return _torch_verdict(parts[1:], shown)
    if root == "triton":
        if len(parts) >= 2 and parts[1] == "language":
            return tl_walk(parts[2:], shown if len(parts) == 2 else shown.rsplit(".", len(parts) - 2)[0])
        return _triton_verdict(parts, shown)
    if root == "math":
        if len(parts) == 1:
            return NAMESPACE, None, None
        mod = _module("math")
        name = parts[1]
        if name.startswith("_") or not hasattr(mod, name):
            hint = _suggest(name, _public_names(mod), "math.")
            return ("reject", "unknown-attr", f"{shown} does not exist in math" + (f"; {hint}" if hint else ""))
        return ALLOW, None, None
    if root == "functools":
        if len(parts) == 1:
            return NAMESPACE, None, None
        name = parts[1]
        if name in FUNCTOOLS_CACHES:
            return ("reject", "global-state", f"{shown} caches results across calls (an output cache); "
                                              "recompute every call: the kernel is the work")
        if name not in FUNCTOOLS_OK:
            return ("reject", "import", f"{shown} is not allowed; functools offers candidates only "
                                        "partial, reduce and wraps")
        return ALLOW, None, None
    if root == "__future__":
        return (NAMESPACE if len(parts) == 1 else ALLOW), None, None
    if root == "typing":
        if len(parts) == 1:
            return NAMESPACE, None, None
        if parts[1] not in TYPING_OK:
            return ("reject", "escape", f"{shown} is not allowed: typing offers candidates only annotations and "
                                        "cast (get_type_hints and friends evaluate strings as code); allowed: "
                                        + ", ".join(f"typing.{n}" for n in sorted(TYPING_OK)))
        return ALLOW, None, None
    return ("reject", "import", f"{shown} comes from a module candidates may not use; {IMPORT_HINT}")


def _torch_verdict(rest: list[str], shown: str) -> tuple[str, str | None, str | None]:
    if not rest:
        return NAMESPACE, None, None
    name = rest[0]
    if name == "cuda":
        if len(rest) == 1:
            return NAMESPACE, None, None
        if rest[1] in TORCH_CUDA_OK:
            return ALLOW, None, None
        return ("reject", "torch-cuda",
                f"{shown} is not allowed: timers, events, streams, graphs and synchronization belong to "
                f"the harness; device queries allowed: "
                + ", ".join(f"torch.cuda.{n}" for n in sorted(TORCH_CUDA_OK)))
    if name in TORCH_ALLOWED_NAMES:
        return ALLOW, None, None
    if name in TORCH_ESCAPES or name.startswith("_"):
        return ("reject", "escape", f"{shown} reaches PyTorch internals, compilers or I/O; a candidate "
                                    "may only allocate with torch, take views and read metadata")
    hint = _suggest(name, TORCH_ALLOC | TORCH_META, "torch.")
    return ("reject", "torch-compute",
            f"{shown} computes with PyTorch; the result must come from your @triton.jit kernels "
            "(launcher code may only allocate: torch.empty/empty_like/zeros/full..., take views and read "
            "metadata)" + (f"; {hint}" if hint else ""))


def _triton_verdict(parts: list[str], shown: str) -> tuple[str, str | None, str | None]:
    dotted = ".".join(parts)
    if dotted in TRITON_NAMESPACES:
        return NAMESPACE, None, None
    if dotted == "triton.tools.tensor_descriptor.TensorDescriptor":
        return ALLOW, None, None
    if len(parts) == 2 and parts[1] in TRITON_OK:
        mod = _module("triton")
        if mod is not None and not hasattr(mod, parts[1]):
            return ("reject", "triton-api", f"{shown} does not exist in triton {triton_version()}")
        return ALLOW, None, None
    name = parts[1] if len(parts) > 1 else ""
    if name == "testing":
        return ("reject", "triton-api", f"{shown}: triton.testing (do_bench) is the harness's timer; "
                                        "candidates may neither call nor replace it")
    mod = _module("triton")
    if len(parts) == 2 and mod is not None and not hasattr(mod, name):
        hint = _suggest(name, TRITON_OK | {"language"}, "triton.")
        return ("reject", "triton-api", f"{shown} does not exist in triton {triton_version()}"
                + (f"; {hint}" if hint else f"; {TRITON_HINT}"))
    return ("reject", "triton-api", f"{shown} is triton's runtime or compiler machinery; {TRITON_HINT}")


# Calls whose result is clean whatever they are given: device queries, dtype info, type tests.
CLEAN_RESULT_CALLS = frozenset({f"torch.cuda.{n}" for n in TORCH_CUDA_OK} | {
    "torch.finfo", "torch.iinfo", "torch.is_tensor", "torch.get_default_dtype", "torch.device", "torch.dtype"})
# Library calls that may receive a tensor (anything else given a tensor computes with it or reads it):
# allocations *_like (their first argument only), descriptors over a tensor, partial, cast, type tests.
TENSOR_ARG_CALLS = frozenset({"functools.partial", "typing.cast", "torch.is_tensor",
                              "triton.tools.tensor_descriptor.TensorDescriptor",
                              "triton.tools.tensor_descriptor.TensorDescriptor.from_tensor"})
# Container methods that store or fetch a tensor without reading it; other methods given a tensor on a
# value that is not a tensor (str.format, list.index, list.count ...) read or compare it.
CONTAINER_METHODS = frozenset({"append", "extend", "insert", "get", "setdefault", "pop", "update", "add",
                               "copy", "items", "keys", "values"})


def torch_call_kind(path: str) -> str:
    """What calling an allowed library path returns, for the tensor-derivation analysis: "tensor" (a new
    allocation), "clean" (sizes, dtypes, devices) or "propagate" (whatever its arguments carry)."""
    parts = path.split(".")
    if len(parts) == 2 and parts[0] == "torch" and parts[1] in TORCH_ALLOC:
        return "tensor"
    if path in CLEAN_RESULT_CALLS:
        return "clean"
    return "propagate"


def tensor_argument_allowed(path: str, position: int | None) -> bool:
    """May the library call `path` receive a tensor at `position` (None: a keyword argument)?"""
    if path in TENSOR_ARG_CALLS:
        return True
    parts = path.split(".")
    return (len(parts) == 2 and parts[0] == "torch" and parts[1].endswith("_like") and parts[1] in TORCH_ALLOC
            and position == 0)
