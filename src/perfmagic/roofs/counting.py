"""FLOPs and bytes of one call of torch code, counted by running it once under two dispatch modes.

* **FLOPs** come from ``torch.utils.flop_counter.FlopCounterMode`` (its convention: a multiply-add is
  2 FLOPs; it counts matmul, bmm, addmm/baddbmm (the product only), convolutions and their backward,
  CUDA flash/efficient/cuDNN attention, ``_scaled_mm``). Everything else counts **zero** there —
  elementwise ops, reductions, softmax, norms, and attention on the CPU. For the common ones perfmagic
  adds a formula (:data:`KNOWN_COMPUTE`; e.g. CPU flash attention ``4·B·H·L·S·D`` forward, pointwise
  arithmetic 1 FLOP per output element); ops known to compute but without a formula are listed in
  ``zero_flop_compute_ops`` so the caller can warn that the FLOPs are an undercount.
* **Bytes** come from :class:`ByteCounter`, a ``TorchDispatchMode`` of our own that adds, for every aten
  op, the bytes of its distinct input tensors plus its output tensors — the **algorithmic traffic**
  (each operand read once, each result written once). It is a lower bound on DRAM traffic when the
  working set does not fit in cache, and an overestimate of it when it does. Details: views and metadata
  ops (``view``, ``_unsafe_view``, ``t``, ``expand``, ``detach``, ``permute``…; every op whose schema
  says it returns an alias) count 0; allocation ops (``empty*``) count 0; an ``out=`` tensor and the
  destination of ``copy_``/``fill_``/``zero_`` count as written, not read; a broadcast input (stride 0)
  counts its distinct elements only; a tensor passed twice to one op counts once.
* The **footprint** adds up the distinct storages those ops read or wrote (an address the allocator hands
  out again counts once): what the call keeps in memory at most, to set against the last-level cache.

The code runs **once**, with its side effects; setup runs before, uncounted. torch is imported
inside functions only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..findings import Finding

BYTES_LABEL = "algorithmic"  # how bytes are counted (worded by render/findings_roofs.py: BYTES_LABEL there)
VIEW_OPS = frozenset({
    "aten.view", "aten._unsafe_view", "aten.t", "aten.expand", "aten.detach", "aten.alias", "aten.permute",
    "aten.transpose", "aten.slice", "aten.select", "aten.as_strided", "aten.unsqueeze", "aten.squeeze",
    "aten.unfold", "aten.diagonal", "aten.split", "aten.split_with_sizes", "aten.unbind", "aten.chunk",
    "aten.narrow", "aten.view_as_real", "aten.view_as_complex", "aten._reshape_alias", "aten.lift_fresh",
    "aten.sym_size", "aten.sym_stride", "aten.sym_numel", "aten.sym_storage_offset", "aten.is_same_size",
    "aten._to_copy_noop", "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty",
    "aten.new_empty_strided", "aten.set_", "aten.resize_", "aten.is_nonzero", "aten._local_scalar_dense",
})
WRITE_ONLY_SELF = frozenset({"aten.copy_", "aten.fill_", "aten.zero_", "aten.uniform_", "aten.normal_",
                             "aten.random_", "aten.exponential_", "aten.bernoulli_"})


def _numel(t: Any) -> int:
    return int(t.numel())


def _out_numel(out: Any) -> int:
    ts = _tensors(out)
    return _numel(ts[0]) if ts else 0


def _attn_fwd(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """q (B, H, L, E) · kᵀ (B, H, S, E) and softmax · v (B, H, S, Ev): 2·B·H·L·S·(E + Ev) = 4·B·H·L·S·D."""
    q, k, v = args[0], args[1], args[2]
    *bh, L, E = q.shape
    S, Ev = k.shape[-2], v.shape[-1]
    return int(2 * math.prod(bh) * L * S * (E + Ev))


def _attn_bwd(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    """2.5× the forward (FlopCounterMode's convention for the CUDA kernels: 5 matmuls vs 2)."""
    ts = _tensors(args)
    grad, q, k, v = ts[0], ts[1], ts[2], ts[3]
    *bh, L, E = q.shape
    S, Ev = k.shape[-2], v.shape[-1]
    return int(5 * math.prod(bh) * L * S * (E + Ev))


def _per_out(k: float) -> Callable[[tuple[Any, ...], dict[str, Any], Any], int]:
    def f(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        return int(k * _out_numel(out))
    f.__doc__ = f"{k:g} FLOP per output element"
    return f


def _per_in(k: float) -> Callable[[tuple[Any, ...], dict[str, Any], Any], int]:
    def f(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
        ts = _tensors(args)
        return int(k * (_numel(ts[0]) if ts else 0))
    f.__doc__ = f"{k:g} FLOP per input element"
    return f


def _alpha_add(args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> int:
    alpha = kwargs.get("alpha", 1)
    return (2 if alpha != 1 else 1) * _out_numel(out)


# Ops FlopCounterMode counts as zero although they compute. A formula (args, kwargs, out) -> FLOPs, or
# None: known to compute, no formula (listed so the FLOP count is flagged as an undercount).
KNOWN_COMPUTE: dict[str, Callable[[tuple[Any, ...], dict[str, Any], Any], int] | None] = {
    "aten._scaled_dot_product_flash_attention_for_cpu": _attn_fwd,
    "aten._scaled_dot_product_flash_attention_for_cpu_backward": _attn_bwd,
    "aten._scaled_dot_product_fused_attention_overrideable": _attn_fwd,
    "aten.add": _alpha_add, "aten.sub": _alpha_add, "aten.mul": _per_out(1), "aten.div": _per_out(1),
    "aten.addcmul": _per_out(2), "aten.addcdiv": _per_out(2), "aten.neg": _per_out(1),
    "aten.relu": _per_out(1), "aten.threshold_backward": _per_out(1), "aten.clamp": _per_out(1),
    "aten.maximum": _per_out(1), "aten.minimum": _per_out(1), "aten.where": _per_out(1),
    "aten.lerp": _per_out(2), "aten.pow": _per_out(1), "aten.sqrt": _per_out(1), "aten.rsqrt": _per_out(1),
    "aten.reciprocal": _per_out(1), "aten.abs": _per_out(1), "aten.square": _per_out(1),
    "aten.sum": _per_in(1), "aten.mean": _per_in(1), "aten.amax": _per_in(1), "aten.amin": _per_in(1),
    "aten.max": _per_in(1), "aten.min": _per_in(1), "aten.norm": _per_in(2), "aten.linalg_vector_norm": _per_in(2),
    "aten._softmax": _per_out(5), "aten._log_softmax": _per_out(5), "aten._softmax_backward_data": _per_out(3),
    "aten._log_softmax_backward_data": _per_out(3),
    "aten.native_layer_norm": _per_out(8), "aten.native_layer_norm_backward": _per_in(10),
    "aten.native_group_norm": _per_out(8), "aten._native_batch_norm_legit": _per_out(8),
    "aten._native_batch_norm_legit_no_training": _per_out(2), "aten.native_batch_norm": _per_out(8),
    "aten._fused_rms_norm": _per_out(4),
    # transcendental: cost depends on the implementation (tens of instructions); listed, not counted
    "aten.exp": None, "aten.log": None, "aten.tanh": None, "aten.sigmoid": None, "aten.gelu": None,
    "aten.gelu_backward": None, "aten.silu": None, "aten.silu_backward": None, "aten.erf": None,
    "aten.sin": None, "aten.cos": None, "aten.tanh_backward": None, "aten.sigmoid_backward": None,
    "aten.cumsum": _per_in(1), "aten.sort": None, "aten.topk": None, "aten.fft_r2c": None, "aten.fft_c2c": None,
    "aten._fft_r2c": None, "aten._fft_c2c": None, "aten._fft_c2r": None, "aten.linalg_solve": None,
    "aten._linalg_svd": None, "aten.linalg_cholesky_ex": None, "aten._linalg_eigh": None,
    "aten.max_pool2d_with_indices": None, "aten.avg_pool2d": None, "aten.embedding_dense_backward": None,
    "aten.index_add": None, "aten.scatter_add": None,
}


def _tensors(obj: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_flatten

    return [x for x in tree_flatten(obj)[0] if isinstance(x, torch.Tensor)]


def tensor_bytes(t: Any) -> int:
    """Bytes of the distinct elements of ``t``: dimensions with stride 0 (broadcast) count once."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return int(n * t.element_size()) if t.numel() else 0


def _key(t: Any) -> tuple[Any, ...]:
    try:
        ptr = t.untyped_storage().data_ptr()
    except Exception:
        ptr = id(t)
    return (ptr, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def _footprint(storages: dict[int, int], t: Any) -> None:
    """Note ``t``'s storage (address and bytes) among those a call touched."""
    try:
        st = t.untyped_storage()
        ptr, size = int(st.data_ptr()), int(st.nbytes())
    except Exception:  # a tensor without storage (meta, sparse): not memory the call moves
        return
    if ptr and size > storages.get(ptr, 0):
        storages[ptr] = size


@dataclass(frozen=True)
class Counts:
    """Work of one call. ``flops`` = ``flops_counter`` (FlopCounterMode) + ``flops_formula`` (perfmagic's
    formulas for ops FlopCounterMode counts as zero). ``bytes`` is algorithmic traffic (:data:`perfmagic.render.findings_roofs.BYTES_LABEL`).
    ``ops`` maps ``aten.op`` -> ``{"calls", "flops", "bytes"}``; ``dtypes`` maps dtype name ->
    ``{"flops", "bytes"}`` (of the ops whose result has that dtype); ``devices`` the device types seen."""

    flops: int
    bytes: int
    ops: dict[str, dict[str, int]] = field(default_factory=dict)
    zero_flop_compute_ops: tuple[str, ...] = ()
    formula_ops: tuple[str, ...] = ()
    flops_counter: int = 0
    flops_formula: int = 0
    dtypes: dict[str, dict[str, int]] = field(default_factory=dict)
    devices: tuple[str, ...] = ()
    notes: tuple[Finding, ...] = ()  # worded by render/findings_roofs.py
    bytes_label: str = BYTES_LABEL
    # bytes of the distinct storages the call's ops read or wrote (an address the allocator hands out again
    # counts once: it is warm in cache the second time too); None where not counted
    footprint: int | None = None

    @property
    def torch_ops(self) -> int:
        """How many aten op calls ran (0: the code did no torch work)."""
        return sum(v["calls"] for v in self.ops.values())

    @property
    def dtype(self) -> str | None:
        """The dtype that did most of the FLOPs (or moved most bytes when no FLOPs were counted)."""
        if not self.dtypes:
            return None
        key = "flops" if any(v["flops"] for v in self.dtypes.values()) else "bytes"
        return max(self.dtypes, key=lambda d: self.dtypes[d][key])

    def table(self, top: int = 12) -> str:
        rows = sorted(self.ops.items(), key=lambda kv: (kv[1]["flops"], kv[1]["bytes"]), reverse=True)[:top]
        lines = [f"  {'op':44s} {'calls':>6s} {'FLOPs':>12s} {'bytes':>12s}"]
        lines += [f"  {k:44s} {v['calls']:6d} {v['flops']:12.4g} {v['bytes']:12.4g}" for k, v in rows]
        return "\n".join(lines)


def _dispatch_mode_base() -> type:
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


def _make_counter() -> Any:
    """A ByteCounter instance (the class is built lazily so this module does not import torch)."""
    Base = _dispatch_mode_base()

    class ByteCounter(Base):  # type: ignore[misc, valid-type]
        """TorchDispatchMode adding up each aten op's input + output tensor bytes (see module docstring),
        and perfmagic's formula FLOPs for :data:`KNOWN_COMPUTE` ops."""

        def __init__(self) -> None:
            super().__init__()
            self.ops: dict[str, dict[str, int]] = {}
            self.dtypes: dict[str, dict[str, int]] = {}
            self.devices: set[str] = set()
            self.formula_errors: list[str] = []
            self.storages: dict[int, int] = {}  # storage address -> its bytes (the call's footprint)

        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = str(func.overloadpacket)
            rec = self.ops.setdefault(name, {"calls": 0, "flops": 0, "bytes": 0, "formula_flops": 0})
            rec["calls"] += 1
            is_view = name in VIEW_OPS or bool(getattr(func, "is_view", False))
            nbytes = 0
            outs = _tensors(out)
            if not is_view:
                out_kw = _tensors(kwargs.get("out")) if "out" in kwargs else []
                written = {_key(t) for t in outs} | {_key(t) for t in out_kw}
                ins = _tensors(args) + _tensors({k: v for k, v in kwargs.items() if k != "out"})
                if name in WRITE_ONLY_SELF and ins:
                    ins = ins[1:]
                    if name in ("aten.copy_",) and ins:
                        written.discard(_key(ins[0]))  # copy_(x, x): still a read
                seen: set[tuple[Any, ...]] = set()
                for t in ins:
                    k = _key(t)
                    if k not in seen:
                        seen.add(k)
                        nbytes += tensor_bytes(t)
                for t in {_key(t): t for t in outs + out_kw}.values():
                    nbytes += tensor_bytes(t)
                for t in ins + outs + out_kw:
                    _footprint(self.storages, t)
            rec["bytes"] += nbytes
            fl = 0
            formula = KNOWN_COMPUTE.get(name)
            if formula is not None:
                try:
                    fl = int(formula(args, kwargs, out))
                except Exception as exc:  # a formula must never break the user's code
                    self.formula_errors.append(f"{name}: {type(exc).__name__}")
                rec["formula_flops"] += fl
            ref = outs[0] if outs else (_tensors(args) or [None])[0]
            if ref is not None and not is_view:
                d = str(ref.dtype).replace("torch.", "")
                if ref.is_floating_point() or ref.is_complex():
                    slot = self.dtypes.setdefault(d, {"flops": 0, "bytes": 0})
                    slot["bytes"] += nbytes
                    slot["flops"] += fl
                    rec.setdefault("by_dtype", {}).setdefault(d, 0)
                    rec["by_dtype"][d] += max(nbytes, 1)
                self.devices.add(ref.device.type)
            return out

    return ByteCounter()


def _runner(fn_or_code: str | Callable[[], Any], namespace: Mapping[str, Any] | None, setup: str) -> Callable[[], Any]:
    if callable(fn_or_code):
        return fn_or_code
    from ..core.cells import compile_cell
    from ..errors import SetupError

    ns: dict[str, Any] = dict(namespace or {})
    if setup:
        try:
            exec(compile(setup, "<perfmagic-setup>", "exec"), ns)
        except Exception as exc:
            raise SetupError(f"the setup code raised {type(exc).__name__}: {exc}") from exc
    cell = compile_cell(str(fn_or_code), ns)
    return lambda: cell.run(1)


def count(fn_or_code: str | Callable[[], Any], namespace: Mapping[str, Any] | None = None, *,
          setup: str = "") -> Counts:
    """Run ``fn_or_code`` (a zero-argument callable, or source read in a copy of ``namespace`` after
    ``setup``) once and count its FLOPs and bytes (see the module docstring)."""
    from torch.utils.flop_counter import FlopCounterMode

    run = _runner(fn_or_code, namespace, setup)
    flop_mode = FlopCounterMode(display=False)
    counter = _make_counter()
    with flop_mode, counter:
        run()
    global_counts = flop_mode.get_flop_counts().get("Global", {})
    per_op_counter = {str(k): int(v) for k, v in global_counts.items()}
    flops_counter = int(flop_mode.get_total_flops())
    ops: dict[str, dict[str, int]] = {}
    zero_listed: list[str] = []
    formula_ops: list[str] = []
    flops_formula = 0
    for name, rec in counter.ops.items():
        fc = per_op_counter.get(name, 0)
        flops = fc
        if fc == 0 and name in KNOWN_COMPUTE:
            if KNOWN_COMPUTE[name] is None:
                zero_listed.append(name)
            elif rec["formula_flops"] > 0:
                flops = rec["formula_flops"]
                flops_formula += flops
                formula_ops.append(name)
        ops[name] = {"calls": rec["calls"], "flops": flops, "bytes": rec["bytes"]}
    # dtype attribution: FlopCounterMode's FLOPs of an op go to the result dtypes of that op's calls
    # (in proportion to their bytes when one op ran in several dtypes)
    dtypes = {d: dict(v) for d, v in counter.dtypes.items()}
    for name, fc in per_op_counter.items():
        by = counter.ops.get(name, {}).get("by_dtype") or {}
        tot = sum(by.values())
        for d, b in by.items():
            dtypes[d]["flops"] += int(fc * b / tot)
    notes = [Finding.of("counting.bytes"), Finding.of("counting.flops")]
    if formula_ops:
        notes.append(Finding.of("counting.formulas", flops=flops_formula, ops=tuple(formula_ops)))
    notes += [Finding.of("counting.formula-failed", op=str(e)) for e in counter.formula_errors]
    return Counts(flops=flops_counter + flops_formula, bytes=sum(v["bytes"] for v in ops.values()), ops=ops,
                  zero_flop_compute_ops=tuple(zero_listed), formula_ops=tuple(formula_ops),
                  flops_counter=flops_counter, flops_formula=flops_formula, dtypes=dtypes,
                  devices=tuple(sorted(counter.devices)), notes=tuple(notes),
                  footprint=sum(counter.storages.values()))
