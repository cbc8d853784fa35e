"""What ``%%flame`` found: :class:`FlameResult` keeps every sample (a root-first stack and the seconds
it stands for); the tables (:meth:`FlameResult.functions`, :meth:`~FlameResult.top`) and the call
tree (:meth:`~FlameResult.tree`) are derived from them.

Text, the flame graph page and the PNG are drawn by :mod:`perfmagic.render.flame`; the methods
here delegate.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..findings import Finding
from ..result import Displayed

_INPUT_NAME = re.compile(r"^<ipython-input-(\d+)-[0-9a-f]+>$")

Frame = tuple[str, str, int]  # (function, file, line)


@dataclass(frozen=True)
class FuncStat:
    """One function (name + file) over all samples: self and total seconds, its busiest line."""

    name: str
    file: str
    line: int
    self_s: float
    total_s: float
    self_frac: float
    total_frac: float
    where: str  # "In [3]:4" or "module.py:12"



@dataclass(frozen=True, repr=False)
class FlameResult(Displayed):
    """The samples of one run of a cell, cut so the cell is the root. Derived tables are computed.

    Its display bundle is :func:`perfmagic.render.flame.mimebundle` (the interactive flame graph,
    open, with its PNG fallback), not the generic one: see that module's docstring.
    """

    primary_metric: ClassVar[str] = "top_self_fraction"
    renderer: ClassVar[str] = "flame"

    def sampler_line(self) -> str:
        """How the cell was sampled, in one line (:func:`perfmagic.render.flame.sampler_line`)."""
        from ..render.flame import sampler_line

        return sampler_line(self)

    frames: tuple[Frame, ...]
    stacks: tuple[tuple[int, ...], ...]   # root-first indices into ``frames``, one per sample
    weights: tuple[float, ...]            # seconds each sample stands for
    sampler: str                          # "py-spy" | "inprocess"
    rate_hz: float
    wall_s: float                         # the cell's run time
    label: str = ""
    code: str = ""
    status: str = "ok"                    # "ok" | "failed" (the code raised) | "interrupted"
    error: str | None = None              # "ZeroDivisionError: division by zero"
    fallback_reason: str | None = None    # why py-spy did not run, when it was tried
    startup_s: float | None = None        # sampler start -> ready to sample
    outside_samples: int = 0              # samples outside the cell (perfmagic/IPython), dropped
    native: bool = False
    idle: bool = False
    subprocesses: bool = False
    file_labels: tuple[tuple[str, str], ...] = ()
    notes: tuple[Finding, ...] = ()       # worded by render/ (an older row's text stays a str)
    all_threads: bool = False             # other busy threads of the process shown (py-spy)
    other_threads: tuple[tuple[str, int, int], ...] = ()  # (thread, busy samples, waiting samples), py-spy
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    # ---- derived ------------------------------------------------------------------------------
    @property
    def n_samples(self) -> int:
        return len(self.stacks)

    @property
    def sampled_s(self) -> float:
        return float(sum(self.weights))

    @property
    def interval_s(self) -> float:
        return 1.0 / self.rate_hz

    def where(self, file: str, line: int) -> str:
        """``In [3] line 4`` for a cell, ``name.py:12`` for a file, ``file`` alone for a native library
        (:func:`perfmagic.core.cells.location`)."""
        lab = dict(self.file_labels).get(file)
        if lab is None:
            m = _INPUT_NAME.match(file)
            lab = f"In [{m.group(1)}]" if m else (os.path.basename(file) if file else "")
        if not lab:
            return ""
        from ..core.cells import location

        return location(lab, line)

    def display_name(self, frame: Frame) -> str:
        name, file, _ = frame
        if name == "<module>":
            lab = dict(self.file_labels).get(file)
            if lab is None:
                m = _INPUT_NAME.match(file)
                lab = f"In [{m.group(1)}]" if m else None
            if lab == "cell":
                return "cell"
            return f"cell {lab}" if lab else f"<module> {os.path.basename(file)}".strip()
        return name

    def functions(self) -> list[FuncStat]:
        """Every function with its self and total time, most self time first."""
        tot = self.sampled_s
        selfw: Counter[tuple[str, str]] = Counter()
        totw: Counter[tuple[str, str]] = Counter()
        lines: dict[tuple[str, str], Counter[int]] = {}
        for st, w in zip(self.stacks, self.weights):
            if not st:
                continue
            seen = set()
            for i in st:
                n, f, ln = self.frames[i]
                if _synthetic(self.frames[i]):
                    continue
                key = (n, f)
                lines.setdefault(key, Counter())[ln] += w
                if key not in seen:
                    seen.add(key)
                    totw[key] += w
            leaf = self.frames[st[-1]]
            if not _synthetic(leaf):
                selfw[(leaf[0], leaf[1])] += w
        out = []
        for key, t in totw.items():
            s = selfw.get(key, 0.0)
            ln = lines[key].most_common(1)[0][0] if lines.get(key) else 0
            out.append(FuncStat(self.display_name((key[0], key[1], ln)), key[1], ln, s, t,
                                s / tot if tot else 0.0, t / tot if tot else 0.0, self.where(key[1], ln)))
        out.sort(key=lambda f: (-f.self_s, -f.total_s, f.name))
        return out

    def top(self, n: int = 10, by: str = "self") -> list[FuncStat]:
        fs = self.functions()
        if by == "total":
            fs.sort(key=lambda f: (-f.total_s, -f.self_s, f.name))
        else:
            fs = [f for f in fs if f.self_s > 0]
        return fs[:n]

    def tree(self) -> dict[str, Any]:
        """The flame graph: nested ``{"name", "file", "where", "total", "self", "lines", "children"}``.

        A node is a function (name + file) on one call path; ``lines`` maps each line of it to the
        seconds sampled there. The root is the whole run; its children are the cell (and, with
        py-spy, other threads or child processes that were busy).
        """
        root: dict[str, Any] = {"name": "all", "file": "", "where": "", "total": 0.0, "self": 0.0,
                                "lines": {}, "children": {}}
        for st, w in zip(self.stacks, self.weights):
            node = root
            node["total"] += w
            for i in st:
                fr = self.frames[i]
                key = (fr[0], fr[1])
                ch = node["children"].get(key)
                if ch is None:
                    ch = node["children"][key] = {"name": self.display_name(fr), "file": fr[1],
                                                  "where": self.where(fr[1], 0), "total": 0.0, "self": 0.0,
                                                  "lines": {}, "children": {}}
                ch["total"] += w
                if fr[2]:
                    ch["lines"][fr[2]] = ch["lines"].get(fr[2], 0.0) + w
                node = ch
            node["self"] += w

        def fix(n: dict[str, Any]) -> dict[str, Any]:
            kids = sorted(n["children"].values(), key=lambda c: -c["total"])
            n["children"] = [fix(c) for c in kids]
            return n

        return fix(root)

    # ---- text, HTML, figure: perfmagic.render.flame (the renderer) ------------------------------
    def html(self, png: bytes | None = None, height: int | None = None) -> str:
        """A self-contained interactive flame graph (inline JS + data, no network)."""
        from ..render.flame import html

        return html(self, png=png)

    # ---- serialisation ------------------------------------------------------------------------
    def folded(self) -> dict[str, float]:
        """Brendan Gregg's folded stacks: ``"cell In [5];f;g" -> seconds``."""
        out: dict[str, float] = {}
        for st, w in zip(self.stacks, self.weights):
            key = ";".join(f"{self.display_name(self.frames[i])} ({self.where(*self.frames[i][1:])})" for i in st)
            out[key] = out.get(key, 0.0) + w
        return out

    def metrics(self) -> dict[str, float | int | str | None]:
        top = self.top(3)
        m: dict[str, float | int | str | None] = {
            "top_self_fraction": top[0].self_frac if top else None,
            "n_samples": self.n_samples, "sampled_s": self.sampled_s, "wall_s": self.wall_s,
            "sampler": self.sampler, "rate_hz": self.rate_hz, "startup_s": self.startup_s,
            "outside_samples": self.outside_samples, "fallback_reason": self.fallback_reason,
            "other_thread_busy_samples": sum(b for _, b, _ in self.other_threads) if self.other_threads else None,
            "other_thread_waiting_samples": sum(i for _, _, i in self.other_threads) if self.other_threads else None,
        }
        for k in range(3):
            f = top[k] if k < len(top) else None
            m[f"top{k + 1}_self_name"] = f"{f.name} ({f.where})" if f else None
            m[f"top{k + 1}_self_fraction"] = f.self_frac if f else None
        return m

    def samples(self) -> dict[str, list[Any]]:
        fo = self.folded()
        return {"stack": list(fo), "seconds": list(fo.values())}

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "code": self.code, "status": self.status, "error": self.error,
                "sampler": self.sampler, "rate_hz": self.rate_hz, "wall_s": self.wall_s,
                "metrics": self.metrics(), "samples": self.samples(), "notes": [str(n) for n in self.notes]}


def _synthetic(fr: Frame) -> bool:
    return not fr[1] and fr[0].startswith(("thread ", "process ", "… "))

