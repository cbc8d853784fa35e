"""One change judged: the comparison flow that ``%perf compare``, ``%%gpubench --vs`` and
``perfmagic.compare()`` share.

The comparison that cancels noise is the interleaved one (A B / B A pairs in one process,
:mod:`perfmagic.timing.pair`): a slow stretch of the machine hits both members of a pair. So the flow
**re-measures** when it can — both runs' code can still run here (:mod:`perfmagic.timing.rerun` keeps
what each run called), and they were measured the same way — and only otherwise compares the recorded
samples (:func:`perfmagic.timing.history.compare`), saying why. Re-running the user's code has a
cost of its own: a training step keeps training the model. The state the runs read and a re-run
would change (modules, optimizers, tensors) is snapshotted before and restored after, so the notebook
is left as it was (:func:`perfmagic.timing.snapshot.preserved`); what cannot be snapshotted is named.

**Work.** A run that declares its work per call (``--items``, ``--flops``, ``--bytes``) is judged per
unit of that work when the other run declares the same unit: batch 8 → 32 is 3× slower per call and
may be 1.4× faster per item, and only the second is the question. When one side declares work and the
other does not, or they use different units, the flow refuses to accept or reject (:class:`perfmagic.timing.basis.Basis`).

The flow returns numbers and a verdict category (:class:`perfmagic.timing.history.RunComparison`);
the sentences are written by :mod:`perfmagic.timing.compare` and :mod:`perfmagic.render.timing`. It
never imports IPython: a front end passes ``notify`` (where its one-line notices go) and ``record``
(how a row is written to its ledger).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..errors import BenchInterrupted, PerfmagicError
from ..findings import Finding
from .basis import Basis, basis, work_of  # noqa: F401  (re-exported: the flow judges on this basis)

# options of %%gpubench that change what is measured: A and B must agree on them to be re-measured as a pair
MEASURING_OPTIONS = ("gc", "flush", "device", "sync")
_DEFAULTS = {"gc": False, "flush": False, "device": "auto", "sync": "auto"}
WHERE_TO_BUDGET = 10 ** 9  # --where with a budget given: samples enough never come first; the budget ends it


class RerunError(PerfmagicError):
    """A re-measurement was asked for (``rerun=True``, ``%perf compare --rerun``) and cannot be made."""


# ---- can A and B be re-measured here? ------------------------------------------------------------------

def obstacles(ra: Mapping[str, Any], rb: Mapping[str, Any], captures: Mapping[int, Any],
              ns: Mapping[str, Any]) -> tuple[list[Finding], tuple[str, ...]]:
    """Why A and B cannot be re-measured interleaved in this process (empty: they can), and what A
    read that changed since (named under "what changed" by a historical comparison)."""
    from .rerun import check, moved_name

    why: list[Finding] = []
    if ra.get("magic") != "gpubench" or rb.get("magic") != "gpubench":
        why.append(Finding.of("flow.not-gpubench"))
    oa, ob = ra.get("options") or {}, rb.get("options") or {}
    differ = [k for k in MEASURING_OPTIONS if oa.get(k, _DEFAULTS.get(k)) != ob.get(k, _DEFAULTS.get(k))]
    if differ:
        why.append(Finding.of("flow.options-differ", options=tuple(differ)))
    found: list[Finding] = []  # what A read that changed since
    for side, r in (("A", ra), ("B", rb)):
        cap = captures.get(r.get("id"))  # type: ignore[arg-type]
        if cap is None:
            why.append(Finding.of("flow.other-kernel", side=side, id=r.get("id")))
            continue
        moved = check(cap, ns)
        why += [Finding.of("flow.side-moved", side=side, id=r.get("id"), why=str(x)) for x in moved]
        if side == "A":
            found = list(moved)
        else:  # changed after B ran too: not a difference between A and B
            names = {moved_name(x) for x in moved} - {None}
            found = [x for x in found if moved_name(x) not in names]
    return why, tuple(str(x) for x in found)


# ---- the state a re-run changes ---------------------------------------------------------------------

class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def protect(caps: list[Any], ns: Mapping[str, Any], *, force: bool, notify: Callable[[str], None]) -> Any:
    """A context manager that snapshots the state ``caps`` read and restores it on exit (a re-measured
    train step must not keep training the user's model); its size is said through ``notify``.

    State that cannot be snapshotted: with ``force`` (the user asked to re-run anyway) a notice names
    it and everything else is still protected; otherwise :class:`RerunError` names it and the fix."""
    from .snapshot import SnapshotError, preserved

    try:
        snap = preserved(caps, ns)
    except SnapshotError as exc:
        if not force:
            raise RerunError(str(exc)) from None
        notify(str(Finding.of("flow.forced", names=tuple(exc.names),
                              reasons=tuple((k, str(v)) for k, v in exc.reasons.items()))))
        snap = preserved(caps, ns, skip=tuple(exc.names))
    if snap.nbytes:
        notify(str(Finding.of("flow.snapshot", names=tuple(snap.names), nbytes=snap.nbytes)))
    return snap


def value_notes(caps: list[Any]) -> list[Finding]:
    """What the re-measurement cannot vouch for: data whose values, not only shapes, set the cost."""
    from .rerun import values_may_matter

    out: list[Finding] = []
    for c in caps:
        for n in values_may_matter(c):
            if n not in out:
                out.append(n)
    return out


# ---- the flow ------------------------------------------------------------------------------------------

def _recorder(record: Callable[..., Any] | None, ledger: Any) -> Callable[..., Any] | None:
    if record is not None:
        return record
    if ledger is None:
        return None

    def rec(*, magic_line: str = "", code: str, result: Any = None, **fields: Any) -> Any:
        if result is not None:  # the kind and payload that rebuild it (perfmagic.run)
            rec_ = result.to_record(magic=fields["magic"], code=code, magic_line=magic_line)
            fields.update(kind=rec_.kind, payload=rec_.payload)
        return ledger.record(code=code, magic_line=magic_line, **fields)

    return rec


def _with_work(res: Any, work: Mapping[str, float]) -> Any:
    return replace(res, work=dict(work)) if work else res


def compare_runs(a: Any, b: Any, *, ledger: Any = None, rerun: bool | None = None,
                 captures: Mapping[int, Any] | None = None, globals: Mapping[str, Any] | None = None,
                 budget: float | None = None, min_effect: float = 0.10, record: Callable[..., Any] | None = None,
                 notify: Callable[[str], None] | None = None, filenames: tuple[str, str] | None = None,
                 where: bool | None = None, file_labels: Mapping[str, str] | None = None,
                 **historical: Any) -> Any:
    """Judge run B against run A, the honest way first.

    ``a``/``b``: run ids, ledger rows or :class:`BenchResult` s. ``rerun``: None (default) re-measures
    A and B interleaved in this process when both can still run here — in a notebook with perfmagic
    loaded, or when ``globals`` (the namespace their code reads) is given — else compares the recorded
    samples and says why through ``notify``; True re-measures or raises :class:`RerunError`; False
    compares the recorded samples. The re-measured rows are recorded (``record``, or ``ledger``) as
    re-runs of A and B. Returns a :class:`RunComparison`; a Ctrl-C during the re-measurement raises
    :class:`BenchInterrupted` with the partial :class:`PairResult` (its rows recorded as interrupted).
    ``where``: None (default) samples both sides' stacks while they are re-measured and attaches where the
    change went (:class:`perfmagic.profile.where.WhereResult`, ``rc.where``; shown when the verdict is a
    change); True also shows it for any verdict, and raises :class:`RerunError` when the runs cannot be
    re-measured (recorded runs have no samples of their stacks); False samples nothing. ``file_labels``
    names files in that table (``{"/tmp/ipykernel_1/ab.py": "In [3]"}``).
    Other keywords go to :func:`perfmagic.timing.history.compare` (``between_run``, ``confidence``, ...).
    """
    from ..core.kernel import kernel_state
    from .history import CompareError, _as_row, compare

    say = notify or (lambda _msg: None)
    ra, rb = _as_row(a, ledger), _as_row(b, ledger)
    if ra.get("id") is not None and ra.get("id") == rb.get("id"):
        raise CompareError(f"A and B are the same run (#{ra['id']}): a run compared with itself tells nothing; "
                           "give two different runs, e.g. the baseline and the change")
    if where:
        rerun = _where_needs_rerun(rerun, ra, rb)
    if rerun is False or _interleaved(ra, rb):
        return compare(ra, rb, min_effect=min_effect, ledger=ledger, **historical)
    script = captures is None and globals is not None   # a script: capture what the code calls now
    state, user_ns = kernel_state() if captures is None or globals is None else (None, None)
    if captures is None:
        captures = dict((state or {}).get("captures") or {})
    ns: Mapping[str, Any] | None = globals if globals is not None else user_ns
    if ns is None:
        if where:
            raise RerunError(str(Finding.of("where.historical", reason="no-namespace")))
        if rerun:
            raise RerunError("A and B cannot be re-measured: no namespace to run their code in (pass "
                             "globals=globals(), or call it in a notebook with perfmagic loaded)")
        return compare(ra, rb, min_effect=min_effect, ledger=ledger, **historical)
    if script:  # what the code calls now is what it called then
        from .rerun import capture

        captures = dict(captures)
        for r in (ra, rb):
            if r.get("id") not in captures and r.get("code") is not None:
                captures[r.get("id")] = capture(_body(r), (r.get("options") or {}).get("setup") or "", ns)
    why, data = obstacles(ra, rb, captures, ns)
    if why:
        if where:
            raise RerunError(str(Finding.of("where.historical", reason="obstacles",
                                            detail="; ".join(map(str, why)))))
        if rerun:
            raise RerunError("A and B cannot be re-measured in this process: " + "; ".join(map(str, why))
                             + ". Compare the recorded samples instead (--historical, rerun=False)")
        say(str(Finding.of("flow.historical", why=tuple(str(w) for w in why))))
        rc = compare(ra, rb, min_effect=min_effect, ledger=ledger, data_changes=data, **historical)
        return functions_changed(rc, captures.get(ra.get("id")), captures.get(rb.get("id")))
    try:
        guard = protect([captures[ra["id"]], captures[rb["id"]]], ns, force=bool(rerun), notify=say)
    except RerunError as exc:
        say(str(Finding.of("flow.historical-snapshot", why=str(exc))))
        return compare(ra, rb, min_effect=min_effect, ledger=ledger, **historical)
    rc = remeasure(ra, rb, captures[ra["id"]], captures[rb["id"]], ns, guard=guard, budget=budget,
                   min_effect=min_effect, record=_recorder(record, ledger), ledger=ledger, notify=say,
                   filenames=filenames, where=where, file_labels=file_labels)
    rc = functions_changed(rc, captures[ra["id"]], captures[rb["id"]])
    notes = value_notes([captures[ra["id"]], captures[rb["id"]]])
    if notes and hasattr(rc, "notes"):
        rc = replace(rc, notes=tuple(rc.notes) + tuple(Finding.of("flow.values-matter", why=str(n)) for n in notes))
    return rc


def functions_changed(rc: Any, cap_a: Any, cap_b: Any) -> Any:
    """The comparison with the notebook functions A and B called under one name whose code differs added
    to what changed: the cells may read the same (``step()``) while ``head`` was redefined between them,
    and a re-measured A runs with the functions it called then."""
    from .rerun import function_changes
    from .whatchanged import with_functions

    if cap_a is None or cap_b is None or getattr(rc, "what", None) is None:
        return rc
    fns = function_changes(cap_a, cap_b)
    return replace(rc, what=with_functions(rc.what, fns)) if fns else rc


def _where_needs_rerun(rerun: bool | None, ra: Mapping[str, Any], rb: Mapping[str, Any]) -> bool:
    """``where=True`` asks for a re-measurement: the recorded runs hold no samples of their stacks."""
    reason = "historical" if rerun is False else ("pair" if _interleaved(ra, rb) else None)
    if reason is not None:
        raise RerunError(str(Finding.of("where.historical", reason=reason, a=ra.get("id"), b=rb.get("id"))))
    return True


def _body(row: Mapping[str, Any]) -> str:
    """A row's cell body (``code``; the magic line is its own field, split off older rows on read)."""
    return row.get("code") or ""


# option keys that held a run's relations before they were the record's fields (perfmagic.record.relation)
_RELATION_KEYS = ("remeasured_from", "interleaved", "interleaved_with", "thread_limit")


def _interleaved(ra: Mapping[str, Any], rb: Mapping[str, Any]) -> bool:
    from ..record import relation

    ia, ib = relation(ra, "interleaved_with"), relation(rb, "interleaved_with")
    return (ib is not None and ib == ra.get("id")) or (ia is not None and ia == rb.get("id"))


def remeasure(ra: Mapping[str, Any], rb: Mapping[str, Any], cap_a: Any, cap_b: Any, ns: Mapping[str, Any], *,
              guard: Any = None, budget: float | None = None, min_effect: float = 0.10,
              record: Callable[..., Any] | None = None, ledger: Any = None,
              notify: Callable[[str], None] | None = None,
              filenames: tuple[str, str] | None = None, where: bool | None = None,
              file_labels: Mapping[str, str] | None = None) -> Any:
    """A and B interleaved in this process (A with the callables it used then), inside ``guard`` (the
    snapshot of the state they change); both re-measured rows recorded; the paired verdict, with where
    the change went unless ``where`` is False (:func:`perfmagic.profile.where.attribute`)."""
    from ..core.threads import thread_limits
    from .pair import bench_pair
    from .rerun import namespace

    say = notify or (lambda _msg: None)
    ob = rb.get("options") or {}
    status, limit = "ok", None
    wa, wb = work_of(ra), work_of(rb)

    watches: list[Any] = []

    def measure() -> Any:
        watches[:] = [where_sampler(asked=bool(where), to_budget=budget is not None)] if where is not False else []
        return bench_pair(cap_a.code, cap_b.code, cap_a.setup, cap_b.setup, globals=namespace(cap_a, ns),
                          globals_b=namespace(cap_b, ns), labels=(ra.get("label"), rb.get("label")),
                          budget=budget, min_effect=min_effect,
                          filenames=filenames or ("<perfmagic-A>", "<perfmagic-B>"),
                          gc=bool(ob.get("gc", False)), device=ob.get("device") or "auto",
                          sync=ob.get("sync") or "auto", watch=watches[0] if watches else None)

    with guard if guard is not None else _Nothing():
        try:
            pr = measure()
            limit = _thread_limit(pr, say)
            if limit is not None:
                with thread_limits(limit):
                    pr = measure()
        except BenchInterrupted as exc:
            if exc.result is None:
                raise
            pr, status = exc.result, "interrupted"
    pr = replace(pr, a=_with_work(pr.a, wa), b=_with_work(pr.b, wb))
    refs: list[Any] = []
    if record is not None:
        refs = record_pair(pr, ra, rb, record=record, status=status, limit=limit,
                           notes=tuple(str(Finding.of("flow.row-note", id=r.get("id"))) for r in (ra, rb)))
        say(str(Finding.of("flow.remeasured", a=ra.get("id"), b=rb.get("id"), pairs=pr.a.n_samples,
                           ids=tuple(x.id for x in refs if x is not None))))
    if pr.advice():
        say(str(Finding.of("flow.advice", advice=str(pr.advice()))))
    if status == "interrupted":
        raise BenchInterrupted(pr)
    if pr.comparison is None:
        return pr
    rc = pair_verdict(pr, refs, ledger=ledger, min_effect=min_effect)
    return attach_where(rc, watches, ra, rb, refs, record=record, shown=bool(where), file_labels=file_labels)


def where_sampler(asked: bool, to_budget: bool = False) -> Any:
    """The sampler of a re-measurement: asked for (``where=True``), it keeps the pairs going past a clear
    verdict until each side has enough samples to attribute (within the budget), and with a budget given
    (``to_budget``) until the budget ends: a budget given with ``--where`` buys samples, which is what
    narrows each function's Δ; by default it only watches the pairs the verdict needs."""
    import sys

    from ..profile.where import WHERE_MIN_SAMPLES, PairSampler

    need = (WHERE_TO_BUDGET if to_budget else WHERE_MIN_SAMPLES) if asked else 0
    # with torch loaded, each op's change too (profiled after the timed pairs; none where no op ran)
    return PairSampler(min_samples=need, ops="torch" in sys.modules)


def attach_where(rc: Any, watches: list[Any], ra: Mapping[str, Any], rb: Mapping[str, Any], refs: list[Any], *,
                 record: Callable[..., Any] | None, shown: bool, file_labels: Mapping[str, str] | None = None) -> Any:
    """The verdict with where the change went (``rc.where``); where it is shown (``shown``: asked for, or
    beside a verdict that is a change) it is also recorded as its own row (kind ``where``,
    ``interleaved_with`` B's re-measured row)."""
    if not watches or not hasattr(rc, "where"):
        return rc
    from ..profile.where import attribute

    wr = attribute(watches[0], labels=(str(ra.get("label") or "A"), str(rb.get("label") or "B")),
                   runs=(ra.get("id"), rb.get("id")), shown=shown, file_labels=dict(file_labels or {}))
    change = getattr(getattr(rc, "comparison", None), "verdict", None) in ("faster", "slower")
    if record is not None and len(refs) == 2 and refs[1] is not None and (shown or change):
        record(magic="where", label=f"{wr.labels[0]} → {wr.labels[1]}", code="", result=wr,
               options={"a": ra.get("id"), "b": rb.get("id")}, interleaved_with=refs[1].id,
               metrics=wr.metrics(), samples=wr.samples(), env={}, status="ok", primary_metric=wr.primary_metric,
               note=str(Finding.of("where.row-note", a=ra.get("id"), b=rb.get("id"))))
    return replace(rc, where=wr)


def record_pair(pr: Any, ra: Mapping[str, Any], rb: Mapping[str, Any], *, record: Callable[..., Any],
                status: str = "ok", limit: int | None = None,
                notes: tuple[str | None, str | None] = (None, None)) -> list[Any]:
    """Both sides of an interleaved pair as two ledger rows, A's first; returns their references.

    ``ra``/``rb``: the rows the sides come from. A side that was a recorded run (it has an ``id``) is
    recorded as a re-run of it; a new cell (``%%gpubench --vs``'s B) passes its would-be row: ``label``,
    ``magic_line`` and ``options``, no ``id``. B's row is ``interleaved_with`` A's new row; both carry the
    thread ``limit`` the pair was measured under, the ``status`` (``"interrupted"`` for a partial pair),
    the work each side declared, and ``notes`` (a ledger note for each side, or None)."""
    from ..core.env import fingerprint

    refs: list[Any] = []
    for r, res, note in ((ra, pr.a, notes[0]), (rb, pr.b, notes[1])):
        opts = {k: v for k, v in (r.get("options") or {}).items() if k not in _RELATION_KEYS}  # the user's
        if res.work:
            opts["work"] = dict(res.work)
        code = r.get("code") if r.get("code") is not None else res.code  # the row's cell body, as it was recorded
        refs.append(record(magic="gpubench", label=res.label, code=code, magic_line=r.get("magic_line") or "",
                           options=opts, result=res, rerun_of=r.get("id"), thread_limit=limit,
                           interleaved_with=refs[0].id if refs and refs[0] is not None else None,
                           metrics=res.metrics(), samples=res.samples(), env=res.env,
                           env_hash=fingerprint(res.env) if res.env else None, status=status,
                           primary_metric=res.primary_metric, note=note))
    return refs


def pair_verdict(pr: Any, refs: list[Any], *, ledger: Any = None, min_effect: float = 0.10) -> Any:
    """The verdict of a measured pair (``pr.comparison`` not None): from its two recorded rows when the
    ledger reads them back (what ``%perf compare`` of those rows says later), else from the results in
    memory (:func:`judge_pair`)."""
    from .history import compare

    if ledger is not None and len(refs) == 2 and all(x is not None for x in refs):
        try:
            return compare(ledger.get(refs[0].id), ledger.get(refs[1].id), min_effect=min_effect, ledger=ledger)
        except Exception:  # noqa: BLE001 - a ledger that cannot be read back: judge the results in memory
            pass
    return judge_pair(pr, min_effect=min_effect)


def _thread_limit(pr: Any, say: Callable[[str], None]) -> int | None:
    """The threads the pools may use for an honest A/B under this load, when the pair just measured was
    oversubscribed (said through ``say``), else None: both sides are then measured again with that limit."""
    from ..core.threads import env_oversubscription
    from ..core.load import free_cores

    over = env_oversubscription(pr.b.env)
    if not over:
        return None
    limit = free_cores(pr.b.env)
    say(str(Finding.of("flow.thread-limit", over=str(over).split(": its threads")[0], limit=limit)))
    return limit


def judge_pair(pr: Any, *, min_effect: float = 0.10) -> Any:
    """The paired verdict of a :class:`PairResult` as a :class:`RunComparison` (its results carry their
    work, so a per-item comparison stays per item)."""
    from .history import compare

    return compare(pr.a, pr.b, min_effect=min_effect, paired=True)


def measure_against(row_a: Mapping[str, Any], code_b: str, setup_b: str, ns: Mapping[str, Any], *,
                    label_b: str | None, work_b: Mapping[str, float] | None = None, budget: float | None = None,
                    precision: float = 0.01, min_effect: float = 0.10, min_samples: int = 10,
                    device: str = "auto", sync: str = "auto", memory: bool = True, gc: bool = False,
                    filenames: tuple[str, str] = ("<perfmagic-A>", "<perfmagic-B>"),
                    notify: Callable[[str], None] | None = None, force: bool = True, where: bool | None = False,
                    watches: list[Any] | None = None, cap_a: Any = None) -> Any:
    """``%%gpubench --vs RUN``: this cell (B) timed interleaved with recorded run A's code, in ``ns``,
    with the state both change snapshotted and restored. ``cap_a``: what A called when it ran (the
    kernel's capture of run A); A then runs with those functions over ``ns``, as ``%perf compare``
    re-runs it (a function redefined since is the change measured), else with ``ns``'s. Returns the :class:`PairResult` (both sides
    carry their work: A's from its row, B's as given); Ctrl-C raises :class:`BenchInterrupted`.

    ``where`` (not False) samples both sides' stacks while they are timed (:func:`where_sampler`; True
    keeps the pairs going until each side has enough samples to attribute); the sampler of the pairs
    measured is left in ``watches``, for :func:`attach_where` once the verdict is known."""
    from .pair import bench_pair
    from .rerun import capture, namespace

    from ..core.threads import thread_limits

    say = notify or (lambda _msg: None)
    code_a, setup_a = _body(row_a), (row_a.get("options") or {}).get("setup") or ""
    caps = [cap_a if cap_a is not None else capture(code_a, setup_a, ns), capture(code_b, setup_b, ns)]
    ns_a = namespace(cap_a, ns) if cap_a is not None else ns
    guard = protect(caps, ns, force=force, notify=say)
    interrupted: BenchInterrupted | None = None
    limit = None

    def measure() -> Any:
        if watches is not None:
            watches[:] = [where_sampler(asked=bool(where), to_budget=budget is not None)] if where is not False else []
        return bench_pair(code_a, code_b, setup_a, setup_b, globals=ns_a, globals_b=ns, labels=(row_a.get("label"), label_b),
                          budget=budget, precision=precision, min_effect=min_effect, min_samples=min_samples,
                          device=device, sync=sync, memory=memory, gc=gc, filenames=filenames,
                          watch=watches[0] if watches else None)

    with guard:
        try:
            pr = measure()
            limit = _thread_limit(pr, say)
            if limit is not None:
                with thread_limits(limit):
                    pr = measure()
        except BenchInterrupted as exc:
            interrupted = exc
            pr = exc.result
    if pr is not None:
        pr = replace(pr, a=_with_work(pr.a, work_of(row_a)), b=_with_work(pr.b, work_b or {}))
        if limit is not None:   # recorded with both rows: the verdict holds for that many threads
            pr = replace(pr, a=replace(pr.a, policy={**pr.a.policy, "thread_limit": limit}),
                         b=replace(pr.b, policy={**pr.b.policy, "thread_limit": limit}))
    if interrupted is not None:
        raise BenchInterrupted(pr)
    return pr


__all__ = ["Basis", "RerunError", "attach_where", "basis", "compare_runs", "judge_pair", "measure_against",
           "functions_changed", "obstacles", "pair_verdict", "protect", "record_pair", "remeasure", "where_sampler", "work_of"]
