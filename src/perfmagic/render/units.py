"""The older name of the units part of :mod:`perfmagic.render.text` (kept for the modules that import it)."""

from __future__ import annotations

from .text import clip, fmt_bytes, fmt_rate, fmt_time, parse_duration

__all__ = ["clip", "fmt_bytes", "fmt_rate", "fmt_time", "parse_duration"]
