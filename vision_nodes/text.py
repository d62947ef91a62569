"""Untrusted text made safe to log: bounded in length, control characters escaped.

Strings from messages (encodings, frame ids), files (manifest names, paths, values) and
exceptions that quote them can be arbitrarily long, or hold newlines and terminal escape
sequences that forge log lines. Everything such a string passes through on its way to a log
goes through :func:`clip` first; values quoted in an error message go through :func:`show`
(paths through :func:`clip_path` and :func:`show_path`, which keep their end).
"""

from __future__ import annotations

import os
import reprlib

#: Default longest piece of untrusted text a log line carries.
DEFAULT_LIMIT = 200

#: Types whose repr is built piecewise by :mod:`reprlib`, never whole: a YAML value can be a
#: list of a million items, or a string of 50 MB.
_CONTAINERS = (dict, list, tuple, set, frozenset, bytes, bytearray, int, float)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f'\\x{code:02x}'
    if code < 0x10000:
        return f'\\u{code:04x}'
    return f'\\U{code:08x}'


def _bounded_repr(value: object, limit: int) -> str:
    """``repr(value)`` built with every level cut short, so its cost is bounded too."""
    shortener = reprlib.Repr()
    shortener.maxlevel = 3
    shortener.maxdict = shortener.maxlist = shortener.maxtuple = 6
    shortener.maxset = shortener.maxfrozenset = 6
    shortener.maxstring = shortener.maxother = max(limit, 8)
    shortener.maxlong = 40
    try:
        return shortener.repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return f'<{type(value).__name__}>'


def clip(text: object, limit: int = DEFAULT_LIMIT) -> str:
    r"""Return ``str(text)`` cut to ``limit`` characters, with non-printables escaped.

    A cut string ends with ``…(+N chars)``, so the reader knows it was cut and by how much.
    Newlines, carriage returns, ESC and every other non-printable character become visible
    escapes (``\x0a``), so the result is always one line of plain text. Containers and
    numbers are represented piecewise (``[1, 2, 3, 4, 5, 6, ...]``), never converted whole.
    """
    if isinstance(text, str):
        pass
    elif isinstance(text, _CONTAINERS):
        text = _bounded_repr(text, limit)
    else:
        text = str(text)
    head = text[:limit]
    out = ''.join(ch if ch.isprintable() else _escape(ch) for ch in head)
    if len(text) > limit:
        out += f'…(+{len(text) - limit} chars)'
    return out


def show(value: object, limit: int = 80) -> str:
    """Quote an untrusted value for an error message: strings in quotes, all of it clipped."""
    if isinstance(value, str):
        return f"'{clip(value, limit)}'"
    return clip(value, limit)


def clip_path(path: object, limit: int = DEFAULT_LIMIT) -> str:
    """Return a path cut to ``limit`` characters in its middle, never at its file name.

    ``/very/long/…(+120 chars)…/folder/params.yaml``: the start says where, the end what.
    Anything that is not a path (``str`` or ``os.PathLike``) is clipped as :func:`clip` does.
    """
    if not isinstance(path, (str, os.PathLike)):
        return clip(path, limit)
    text = str(path)
    if len(text) <= limit:
        return clip(text, limit)
    keep = max(limit // 2, 1)
    return (f'{clip(text[:keep], keep)}…(+{len(text) - 2 * keep} chars)…'
            f'{clip(text[-keep:], keep)}')


def show_path(path: object, limit: int = DEFAULT_LIMIT) -> str:
    """Quote a path for an error message as :func:`clip_path` cuts it (the file name kept)."""
    if not isinstance(path, (str, os.PathLike)):
        return show(path, limit)
    return f"'{clip_path(path, limit)}'"
