"""How a run is stored compactly (schema 2): JSON compressed against a fixed dictionary, samples as
byte-shuffled binary floats, the machine described once.

* **JSON fields** (:func:`pack_json` / :func:`unpack_json`): a run's options, metrics and own environment
  fields as JSON, deflated with a preset dictionary of the keys and values perfmagic writes (``ZDICT``):
  a ``%%gpubench`` run's options take ~25 bytes, its metrics ~140, instead of ~300 each.
* **Samples** (:func:`pack_samples` / :func:`unpack_samples`): the JSON value a result's ``samples()``
  gave, with every list of four or more floats (and the float column of lists of ``[int, float]`` pairs,
  a warmup's blocks) taken out as binary: integers ``k`` with ``x = k·2**E`` exactly when they fit 32 or
  64 bits (timings do: :func:`_as_ints`), else float64; shuffled byte-plane by byte-plane (the high bytes
  of one run's timings are alike, and compress) and deflated with the rest. It reads
  back equal to the JSON it replaces (float64 is what JSON held; NaN and ±inf included).
* **Environment** (:func:`split_env` / :func:`join_env`): the fields that describe the machine and its
  software (CPU model, core counts, limits, versions, device) are stored once per distinct set in the
  ``envs`` table; a run keeps only what it measured itself (load, free memory, clocks, the drift guard).

``ZDICT`` and the byte layouts are part of the file format: changing them needs new magic bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import zlib
from array import array
from typing import Any

_MAGIC = b"PMS1"
_PLAIN = b"PMJ1"  # a value the packer leaves as plain JSON (a dict that uses the marker key itself)
_JSON = b"PMZ1"   # JSON deflated with ZDICT
_MARK = "__f64__"
_PAIRS = "__f64pairs__"
# What perfmagic writes most, as JSON.dumps writes it: deflate finds these strings here instead of
# spelling them out in each run (part of the format: see the module docstring)
ZDICT = (b'{"label": "", "budget": 0.5, "precision": 0.01, "warmup": "auto", "min_samples": 10, "device": "auto", '
         b'"sync": "auto", "flush": false, "items": null, "flops": null, "nbytes": null, "gc": false, "no_memory": '
         b'false, "no_plot": true, "output": false, "quiet": false, "baseline": false, "vs": null, "min_effect": 0.1, '
         b'"setup": "", "interleaved_with": , "remeasured_from": , "work": {"items": '
         b'{"median_s": , "ci_low_s": , "ci_high_s": , "iqr_s": , "min_s": , "cold_s": , "n_samples": , "number": , '
         b'"wall_s": , "traced_peak_bytes": , "rss_peak_increase_bytes": 0, "items_per_s": , "flops_per_s": , '
         b'"bytes_per_s": }{"mem_limit_available_bytes": null, "loadavg_1m": , "mem_available_bytes": , "gc_enabled": '
         b'true, "gpu": null, "cpu_freq_mhz": , "others_cores": , "active_threads": 1, "reference_s": , "own_cores": , '
         b'"reference_before_s": , "reference_best_s": , "cold_others_cores": null, "cold_preempted": , '
         b'"cold_off_cpu_s": {"raw": {"__f64__": }, "number": , "warmup": {"__f64pairs__": [, "cold_s": , '
         b'"timer_overhead_s": e-05, e-06, e-07, 0.0, null, true, false, "}')


def _deflate(data: bytes) -> bytes:
    co = zlib.compressobj(9, zlib.DEFLATED, 15, 9, zlib.Z_DEFAULT_STRATEGY, ZDICT)
    return co.compress(data) + co.flush()


def _inflate(data: bytes) -> bytes:
    do = zlib.decompressobj(15, ZDICT)
    return do.decompress(data) + do.flush()


def pack_json(text: str | None) -> bytes | None:
    """JSON text (as the ledger writes it) deflated against ``ZDICT``; None stays None."""
    return None if text is None else _JSON + _deflate(text.encode("utf-8", "surrogatepass"))


def unpack_json(value: Any) -> Any:
    """The text :func:`pack_json` packed, or ``value`` as it is (schema 1's JSON text)."""
    if isinstance(value, (bytes, memoryview)) and bytes(value[:4]) == _JSON:
        return _inflate(bytes(value[4:])).decode("utf-8", "surrogatepass")
    return value


def _shuffle(raw: bytes, width: int) -> bytes:
    return b"".join(raw[j::width] for j in range(width))


def _unshuffle(data: bytes, width: int) -> bytes:
    n = len(data) // width
    out = bytearray(len(data))
    for j in range(width):
        out[j::width] = data[j * n:(j + 1) * n]
    return bytes(out)


def _as_ints(xs: list[float]) -> tuple[int, str, list[int]] | None:
    """``(E, typecode, ks)`` with ``x == k × 2**E`` exactly for every value, when the ks fit 32 or 64 bits.

    Timings are differences of ``perf_counter`` readings near one magnitude, so each is an integer number
    of one ulp of that magnitude (2**-38 s on a machine up for hours): 31 bits instead of 64. A value
    that is not (a quotient, a NaN) leaves the floats as they are."""
    exps = []
    for x in xs:
        if not math.isfinite(x):
            return None
        if x == 0.0:
            if math.copysign(1.0, x) < 0:
                return None  # -0.0 would come back as 0.0
            continue
        m, e = math.frexp(x)
        big = int(m * (1 << 53))
        exps.append(e - 53 + ((big & -big).bit_length() - 1))
    if not exps:
        return None
    e0 = min(exps)
    ks = [int(math.ldexp(x, -e0)) for x in xs]
    top = max(abs(k) for k in ks)
    if top >= 1 << 62 or not all(math.ldexp(k, e0) == x for k, x in zip(ks, xs)):
        return None
    return e0, ("i" if top < 1 << 31 else "q"), ks
_MIN_ARRAY = 4

# what describes the machine and its software, not this run: stored once per distinct set
MACHINE_FIELDS = ("python", "platform", "hostname", "cpu_model", "logical_cores", "usable_cores", "cpu_quota",
                  "mem_limit_bytes", "mem_total_bytes", "torch_threads", "torch_interop_threads", "blas", "versions",
                  "device", "cuda_available", "llc_bytes")


def _floats(v: Any) -> bool:
    return isinstance(v, list) and len(v) >= _MIN_ARRAY and all(type(x) is float for x in v)


def _pairs(v: Any) -> bool:
    """``[[int, float], ...]`` (four or more): a warmup's (calls, seconds) blocks."""
    return (isinstance(v, list) and len(v) >= _MIN_ARRAY
            and all(isinstance(p, list) and len(p) == 2 and type(p[0]) is int and type(p[1]) is float for p in v))


def _uses_mark(obj: Any) -> bool:
    if isinstance(obj, dict):
        return _MARK in obj or _PAIRS in obj or any(_uses_mark(v) for v in obj.values())
    if isinstance(obj, list):
        return any(_uses_mark(v) for v in obj)
    return False


def pack_samples(value: Any) -> bytes:
    """``value`` (plain JSON data: dicts, lists, numbers, strings) as compact bytes."""
    if _uses_mark(value):
        return _PLAIN + zlib.compress(json.dumps(value, allow_nan=True).encode())
    floats: list[float] = []

    def walk(v: Any) -> Any:
        if _floats(v):
            floats.extend(v)
            return {_MARK: len(v)}
        if _pairs(v):
            floats.extend(p[1] for p in v)
            return {_PAIRS: [p[0] for p in v]}
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    skeleton = json.dumps(walk(value), allow_nan=True).encode()
    scaled = _as_ints(floats)
    code, e0 = ("d", 0) if scaled is None else (scaled[1], scaled[0])
    a = array(code, floats if scaled is None else scaled[2])
    if a.itemsize not in (4, 8):  # pragma: no cover - an exotic C int
        a, code, e0 = array("d", floats), "d", 0
    if struct.pack("=H", 1) != struct.pack("<H", 1):  # pragma: no cover - a big-endian machine
        a.byteswap()
    head = struct.pack("<IcBh", len(skeleton), code.encode(), a.itemsize, e0)
    return _MAGIC + _deflate(head + skeleton + _shuffle(a.tobytes(), a.itemsize))


def unpack_samples(blob: bytes | None) -> Any:
    """The value :func:`pack_samples` packed (None stays None)."""
    if blob is None:
        return None
    blob = bytes(blob)
    if blob[:4] == _PLAIN:
        return json.loads(zlib.decompress(blob[4:]))
    if blob[:4] != _MAGIC:
        raise ValueError("not perfmagic packed samples")
    body = _inflate(blob[4:])
    n, code, width, e0 = struct.unpack_from("<IcBh", body, 0)
    at = struct.calcsize("<IcBh")
    skeleton = json.loads(body[at:at + n])
    kind = {("d", 8): "d", ("i", 4): "i", ("i", 8): "q", ("q", 8): "q", ("q", 4): "i"}[(code.decode(), width)]
    a = array(kind)
    a.frombytes(_unshuffle(body[at + n:], width))
    if struct.pack("=H", 1) != struct.pack("<H", 1):  # pragma: no cover
        a.byteswap()
    floats = a.tolist() if kind == "d" else [math.ldexp(k, e0) for k in a]
    pos = [0]

    def take(k: int) -> list[float]:
        out = floats[pos[0]:pos[0] + k]
        pos[0] += k
        return out

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            if len(v) == 1 and _MARK in v:
                return take(int(v[_MARK]))
            if len(v) == 1 and _PAIRS in v:
                calls = v[_PAIRS]
                return [[c, x] for c, x in zip(calls, take(len(calls)))]
            return {key: walk(x) for key, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(skeleton)


# What a result's payload (``run_data.payload``) holds most, as ``json.dumps`` writes it: the few fields a
# %%gpubench run stores beside its samples, and the keys the typed codec writes (part of the format)
#: what a payload most often holds (a %%gpubench run's policy, its findings as ``[kind, {values}]``, the
#: fields of the other results), as the JSON encoder writes it: deflate finds these strings here. The
#: likeliest text goes last (deflate reaches the end of its dictionary most cheaply). Part of the format:
#: a new dictionary needs a new prefix, with the old ones kept readable (``PMR1``, the dictionary of the
#: first schema-3 payloads, was replaced before any release).
PAYLOAD_DICT = json.dumps([
    {"__type__": "BenchResult", "code": "", "raw": [], "number": 1, "cold_s": None, "warmup": [], "label": None,
     "setup": "", "timer_overhead_s": 0.0, "wall_s": 0.0, "status": "ok", "env": {}, "work": {}, "run_id": None,
     "error": None, "exception": None, "points": [], "results": [], "times": [], "own_cores": None,
     "others_cores": None, "threads": None, "weak": False, "unreliable": [], "device": "cuda:0", "sync": "cuda",
     "stop_reason": "budget", "memory": {"rss_method": "after-before"}},
    [["bench.spread", {"iqr": 0.1}], ["bench.precision", {"target": 0.01, "got": 0.01}],
     ["bench.few-samples", {"n": 1, "wanted": 10}], ["bench.warmup-drift", {}], ["bench.cold-call", {"ratio": 1}],
     ["bench.short-sample", {}], ["bench.slow-state", {}], ["core.exec-mode", {}], ["core.gpu-throttled", {}],
     ["core.sm-clock", {"mhz": 1}], ["core.oversubscription", {"what": ""}]],
    {"policy": {"budget_s": 1.0, "budget_hard": True, "precision": 0.01, "confidence": 0.95, "warmup": "auto",
                "warmup_calls": 1, "min_samples": 10, "gc": "disabled while timing", "flush": False,
                "compile_mode": "function", "target_block_s": 0.0002, "python": "3.11.7"}, "memory": {},
     "warnings": [["core.others-load", {"others": 1.0, "usable": 2, "container": False}]],
     "notes": [["bench.no-cuda", {}]]},
], allow_nan=True).encode()
_PAYLOAD = b"PMR2"  # a payload: raw deflate against PAYLOAD_DICT


def pack_payload(text: str | None) -> bytes | None:
    """A payload's JSON text deflated against :data:`PAYLOAD_DICT` (raw deflate: no header, no checksum,
    a few bytes less per %%gpubench run); None stays None."""
    if text is None:
        return None
    co = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, PAYLOAD_DICT)
    return _PAYLOAD + co.compress(text.encode("utf-8", "surrogatepass")) + co.flush()


def unpack_payload(value: Any) -> Any:
    """The JSON text :func:`pack_payload` packed (other values as they are)."""
    if isinstance(value, (bytes, memoryview)) and bytes(value[:4]) == _PAYLOAD:
        do = zlib.decompressobj(-15, PAYLOAD_DICT)
        return (do.decompress(bytes(value[4:])) + do.flush()).decode("utf-8", "surrogatepass")
    return value


def split_env(env: Any) -> tuple[str | None, str | None, Any]:
    """``(machine JSON, its hash, the run's own fields)`` of an environment dict; a value that is not a
    dict is kept whole as the run's own."""
    if not isinstance(env, dict):
        return None, None, env
    machine = {k: env[k] for k in MACHINE_FIELDS if k in env}
    own = {k: v for k, v in env.items() if k not in machine}
    if not machine:
        return None, None, own
    text = json.dumps(machine, sort_keys=True, allow_nan=True, separators=(",", ":"))
    return text, hashlib.sha256(text.encode()).hexdigest()[:20], own


def join_env(machine: Any, own: Any) -> Any:
    """The environment dict back from its two parts (the run's own fields win)."""
    if machine is None:
        return own
    if not isinstance(own, dict):
        return own if own is not None else dict(machine)
    return {**machine, **own}


__all__ = ["MACHINE_FIELDS", "PAYLOAD_DICT", "ZDICT", "join_env", "pack_json", "pack_payload", "pack_samples", "split_env",
           "unpack_json", "unpack_payload", "unpack_samples"]
