"""Read-only copies of a call's inputs, so that a write into an input DURING the call faults.

The digest check after a call (correctness.input_digests) misses a kernel that uses an input as scratch
and restores it before returning; a serving engine's other streams reading that input meanwhile would
see garbage. Here every input tensor is copied into memory the operating system or the GPU's MMU
maps read-only, with the same shape, strides and storage offset, and the candidate is called on those
copies. Any store into them (a Triton kernel, the interpreter, a PyTorch op, restored or not) faults:

  CPU (the interpreter): an anonymous mmap per input, filled, then mprotect(PROT_READ); a store is a
      SIGSEGV that ends the worker.
  CUDA: a virtual-memory allocation per input (cuMemCreate/cuMemMap, granularity 2 MiB on the H200),
      filled while read-write, then cuMemSetAccess(PROT_READ) for the device; a store is an illegal
      address, a sticky CUDA error that ends the worker.

The parent attributes the fault to the input-write rule because the same input values passed in
ordinary buffers just before (sandbox/POLICY.md, "Runtime gates"). Only ctypes and the standard library
are used; libcuda is loaded lazily. When the GPU mapping cannot be made (an old driver), the call runs on
plain copies and the reason says the guard was unavailable.
"""
from __future__ import annotations

import ctypes
import mmap
from typing import Any

PROT_READ = 0x1


class GuardUnavailable(RuntimeError):
    """The read-only mapping could not be made here; the message names the failing call."""


def guarded_inputs(inputs: dict[str, Any], writable: tuple[str, ...] = ()) -> tuple[dict[str, Any], str]:
    """(inputs with every tensor replaced by a read-only copy, "mprotect" | "cuda-vmm" | "none").

    Non-tensor arguments are passed through. The `writable` ones (the operator's MUTATES, which the call
    writes by contract) get ordinary copies with the same layout at new addresses. Each read-only copy owns
    its mapping (torch keeps the mmap or the device buffer alive as long as a view lives) and stays
    read-only until it is freed."""
    import torch
    out, how = dict(inputs), "none"
    for name, t in inputs.items():
        if isinstance(t, torch.Tensor) and name in writable:
            out[name] = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)
        elif isinstance(t, torch.Tensor):
            try:
                out[name] = _cuda_readonly(t) if t.device.type == "cuda" else _cpu_readonly(t)
            except GuardUnavailable:
                raise
            except Exception as e:  # noqa: BLE001 - a missing symbol, an odd driver: the guard is off, said so
                raise GuardUnavailable(f"{type(e).__name__}: {str(e)[:200]}") from None
            how = "cuda-vmm" if t.device.type == "cuda" else "mprotect"
    return out, how


def _storage_bytes(t):
    """The tensor's whole storage as a flat uint8 tensor (its offset and strides are re-applied later)."""
    import torch
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


# ---- CPU: mmap + mprotect ------------------------------------------------------------------------
_libc = None


def _mprotect(addr: int, size: int, prot: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if _libc.mprotect(addr, size, prot) != 0:
        raise GuardUnavailable(f"mprotect failed (errno {ctypes.get_errno()})")


def _cpu_readonly(t):
    import torch
    raw = _storage_bytes(t.detach())
    n = raw.numel()
    size = max(mmap.PAGESIZE, -(-n // mmap.PAGESIZE) * mmap.PAGESIZE)
    region = mmap.mmap(-1, size)                    # page-aligned, private, zero-filled
    buf = torch.frombuffer(region, dtype=torch.uint8)
    buf[:n].copy_(raw)
    _mprotect(buf.data_ptr(), size, PROT_READ)      # never made writable again: freed with the last view
    return _like(buf[:n], t)


def _like(raw, t):
    """raw (uint8, the storage's bytes) viewed with t's dtype, shape, strides and storage offset."""
    return raw.view(t.dtype).as_strided(t.shape, t.stride(), t.storage_offset())


# ---- CUDA: driver virtual memory management ------------------------------------------------------
class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):      # CUmemAllocationProp (cuda.h)
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):          # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_ALLOCATION_TYPE_PINNED, _LOCATION_TYPE_DEVICE = 1, 1
_ACCESS_READ, _ACCESS_READWRITE = 0x1, 0x3
_cuda = None


def _driver():
    global _cuda
    if _cuda is None:
        try:
            _cuda = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise GuardUnavailable(f"libcuda.so.1 does not load: {e}") from None
    return _cuda


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise GuardUnavailable(f"{what} returned CUDA driver error {rc}")


class _ReadOnlyDeviceBuffer:
    """One VMM mapping: reserved, backed, mapped read-write for the fill, then read-only.

    Exposes __cuda_array_interface__ so torch wraps it without a copy; torch keeps this object alive as
    long as any view of it lives, and __del__ unmaps it."""

    def __init__(self, nbytes: int, device: int):
        cu = _driver()
        prop = _AllocationProp(type=_ALLOCATION_TYPE_PINNED, location=_Location(_LOCATION_TYPE_DEVICE, device))
        gran = ctypes.c_size_t(0)
        _check(cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), 0),
               "cuMemGetAllocationGranularity")
        g = max(int(gran.value), 1)
        self.size, self.device, self.nbytes = max(g, -(-nbytes // g) * g), device, nbytes
        self.handle, self.ptr = ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)
        self._mapped = self._reserved = self._created = False
        _check(cu.cuMemCreate(ctypes.byref(self.handle), ctypes.c_size_t(self.size), ctypes.byref(prop),
                              ctypes.c_ulonglong(0)), "cuMemCreate")
        self._created = True
        _check(cu.cuMemAddressReserve(ctypes.byref(self.ptr), ctypes.c_size_t(self.size), ctypes.c_size_t(g),
                                      ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)), "cuMemAddressReserve")
        self._reserved = True
        _check(cu.cuMemMap(self.ptr, ctypes.c_size_t(self.size), ctypes.c_size_t(0), self.handle,
                           ctypes.c_ulonglong(0)), "cuMemMap")
        self._mapped = True
        self.set_access(_ACCESS_READWRITE)

    def set_access(self, flags: int) -> None:
        desc = _AccessDesc(location=_Location(_LOCATION_TYPE_DEVICE, self.device), flags=flags)
        _check(_driver().cuMemSetAccess(self.ptr, ctypes.c_size_t(self.size), ctypes.byref(desc),
                                        ctypes.c_size_t(1)), "cuMemSetAccess")

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": (self.nbytes,), "typestr": "|u1", "data": (int(self.ptr.value), False), "version": 2}

    def __del__(self):
        cu = _cuda
        if cu is None:
            return
        if self._mapped:
            cu.cuMemUnmap(self.ptr, ctypes.c_size_t(self.size))
        if self._reserved:
            cu.cuMemAddressFree(self.ptr, ctypes.c_size_t(self.size))
        if self._created:
            cu.cuMemRelease(self.handle)


def _cuda_readonly(t):
    import torch
    raw = _storage_bytes(t.detach())
    n = max(raw.numel(), 1)
    torch.cuda.synchronize()
    buf = _ReadOnlyDeviceBuffer(n, t.device.index if t.device.index is not None else torch.cuda.current_device())
    flat = torch.as_tensor(buf, device=t.device)
    if flat.data_ptr() != int(buf.ptr.value):
        raise GuardUnavailable("torch copied the read-only mapping instead of wrapping it")
    flat[:raw.numel()].copy_(raw)
    torch.cuda.synchronize()
    buf.set_access(_ACCESS_READ)
    return _like(flat[:raw.numel()], t)
