"""``%perf next`` and ``%perf target``: the front end of :mod:`perfmagic.advisor`.

``%perf next [LABEL] [--target T]`` shows the next experiment (:func:`perfmagic.next_step`);
``%perf target [LABEL] T`` stores the time per call that is fast enough (``%perf target`` alone
lists the targets). Both parse, call, display; the engine records the proposal as a prediction.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

_EXAMPLES = "e.g. %perf target 50ms, %perf target epoch 2s, or %perf target 0.05 (seconds)"


def _duration(text: str, where: str) -> float:
    from ..render.units import parse_duration

    try:
        value = parse_duration(text)
    except ValueError:
        value = None
    if value is None or not value > 0 or value == float("inf"):
        raise UsageError(f"{where}: {text!r} is not a positive time per call; give one with its unit, {_EXAMPLES}")
    return value


def _labels(led: Any, notebook: Any) -> list[str]:
    from ..storage.views import labels

    return labels(led, notebook=notebook)


def perf_next(magics: Any, led: Any, t: list[str], args: Any, notebook: Any) -> Any:
    from ..advisor.next import AdvisorError, next_step
    from ._template import finish

    label = " ".join(t) if t else None
    target = _duration(args.target, "%perf next --target") if args.target is not None else None
    try:
        result = next_step(led, target=target, label=label, notebook=notebook, min_effect=args.min_effect,
                           namespace=magics.shell.user_ns, captures=magics.state.get("captures"))
    except AdvisorError as exc:
        raise UsageError(f"%perf next: {exc}") from None
    return finish(magics.shell, result, args)


def perf_target(magics: Any, led: Any, t: list[str], args: Any, notebook: Any) -> Any:
    from ..render.units import fmt_time

    if not t:
        labels = _labels(led, notebook)
        rows = [(lb, led.target(lb)) for lb in labels]
        default = led.target(None)
        shown = [f"  {lb}: {fmt_time(v)}" for lb, v in rows if v is not None and v != default]
        if default is not None:
            shown.insert(0, f"  every label: {fmt_time(default)}")
        print("perfmagic: targets (time per call that is fast enough)\n" + "\n".join(shown) if shown else
              f"perfmagic: no target set; set one with %perf target [LABEL] TIME, {_EXAMPLES}")
        return None
    *words, value = t
    seconds = _duration(value, "%perf target")
    if words:
        label = " ".join(words)
        labels = _labels(led, notebook)
        if label not in labels:
            raise UsageError(f"%perf target: label {label!r} has no runs in this notebook; labels with runs: "
                             + (", ".join(repr(x) for x in labels) or "none")
                             + f". Fix: give one of them, or time the code first with %%gpubench -l {label}")
    else:
        latest = next(iter(led.rows(notebook=notebook, magic="gpubench", limit=1)), None)
        if latest is None:
            raise UsageError("%perf target: no timed run yet, so no label to set it for; time the code first "
                             "(%%gpubench -l NAME) or name the label: %perf target NAME 50ms")
        label = latest["label"]
    led.set_target(label, seconds)
    print(f"perfmagic: target of '{label}' is {fmt_time(seconds)} per call\n"
          "  %perf next says 'stop' once a run of it meets the target with its whole 95% interval")
    return None
