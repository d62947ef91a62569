"""Untrusted text made safe to log: bounded in length, control characters escaped.

Strings from messages (encodings, frame ids), files (manifest names, paths, values) and
exceptions that quote them can be arbitrarily long, or hold newlines and terminal escape
sequences that forge log lines. Everything such a string passes through on its way to a log
goes through :func:`clip` first.
"""

from __future__ import annotations

#: Default longest piece of untrusted text a log line carries.
DEFAULT_LIMIT = 200


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f'\\x{code:02x}'
    if code < 0x10000:
        return f'\\u{code:04x}'
    return f'\\U{code:08x}'


def clip(text: object, limit: int = DEFAULT_LIMIT) -> str:
    r"""Return ``str(text)`` cut to ``limit`` characters, with non-printables escaped.

    A cut string ends with ``…(+N chars)``, so the reader knows it was cut and by how much.
    Newlines, carriage returns, ESC and every other non-printable character become visible
    escapes (``\x0a``), so the result is always one line of plain text.
    """
    text = text if isinstance(text, str) else str(text)
    head = text[:limit]
    out = ''.join(ch if ch.isprintable() else _escape(ch) for ch in head)
    if len(text) > limit:
        out += f'…(+{len(text) - limit} chars)'
    return out
