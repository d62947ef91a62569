"""Pickled PyTorch checkpoints, loaded without running code from the file.

A ``.pt`` file is a pickle: unpickling it with ``torch.load(weights_only=False)`` (what
Ultralytics does) calls whatever functions the file names, so a crafted checkpoint runs code
the moment it is loaded. Here a checkpoint is unpickled by PyTorch's restricted unpickler
(``weights_only=True``), which builds tensors and plain containers and, beyond those, only the
globals of an explicit allowlist. Every global the file names is checked against that list
before anything is unpickled, and a file naming any other is refused.

PyTorch's unpickler lets a pickle *call* an allowlisted class with arguments of its choice,
which would run layer constructors (allocating any size, or, for some layers, downloading
weights). A pickled model never needs that: each layer is created empty and given its saved
state. So classes are allowlisted through :func:`rebuild_only` stand-ins, which can be created
empty and given state but refuse to be called; the loaded objects get their real class back.
"""

from __future__ import annotations

import io
import pickle
import re
import threading
import types
import warnings
from pathlib import Path
from typing import Any, Mapping, NamedTuple

from ..text import clip, show_path
from .common import ModelLoadError, read_weights

#: ``safe_globals`` changes one process-wide set: loads take turns so that one load's exit
#: never removes the entries another is still using.
_LOAD_LOCK = threading.Lock()
#: How PyTorch's restricted unpickler names a global it refused.
_REFUSED = re.compile(r'(?:GLOBAL|global|Unsupported class)\s+([A-Za-z_][\w.]*)')
#: Attribute of a stand-in class that holds the class it stands in for.
_REAL = '_vision_nodes_real_class'


def _refuse_call(self: Any, *args: Any, **kwargs: Any) -> None:
    raise pickle.UnpicklingError(
        f'a checkpoint may rebuild a {type(self).__qualname__} from its saved state, '
        'not construct one')


class Allowlist(NamedTuple):
    """The globals a checkpoint may name, by the name a pickle uses (``module.Qualname``)."""

    #: Classes whose objects are created empty and given their saved state (layers, losses):
    #: loaded through :func:`rebuild_only` stand-ins, so the pickle cannot call them.
    rebuilt: Mapping[str, type]
    #: What the pickle may call with arguments of its choosing: plain data types (NumPy
    #: scalars, paths, namespaces) and narrow functions.
    called: Mapping[str, Any]

    def __contains__(self, name: object) -> bool:
        """Whether a pickle may name ``name``."""
        return name in self.rebuilt or name in self.called

    def resolve(self, name: str) -> Any:
        """Return what the unpickler builds for ``name``."""
        return rebuild_only(self.rebuilt[name]) if name in self.rebuilt else self.called[name]


#: One stand-in per class, made when a checkpoint first names the class.
_STANDINS: dict[type, type] = {}


def rebuild_only(cls: type) -> type:
    """Return a stand-in for ``cls`` that a pickle can rebuild from state but not call.

    Unpickling creates it with ``__new__`` and sets its state (``__setstate__`` or its
    ``__dict__``), as for ``cls``; calling it, which a pickle's REDUCE would do with arguments
    of the file's choosing, raises. :func:`restore_classes` turns its instances into ``cls``.
    """
    standin = _STANDINS.get(cls)
    if standin is None:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # subclassing a deprecated layer warns
            standin = types.new_class(cls.__name__, (cls,), exec_body=lambda ns: ns.update({
                '__init__': _refuse_call, '__module__': cls.__module__,
                '__qualname__': cls.__qualname__, _REAL: cls}))
        standin = _STANDINS.setdefault(cls, standin)
    return standin


def restore_classes(root: Any) -> None:
    """Give every stand-in instance reachable from ``root`` back its real class.

    Walks containers, and objects' attributes, that a checkpoint is made of.
    """
    seen: set[int] = set()
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        real = getattr(type(obj), _REAL, None)
        if real is not None and type(obj) is not real:
            obj.__class__ = real
        if isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            todo.extend(obj)
        elif hasattr(obj, '__dict__') and not isinstance(obj, type):
            todo.extend(vars(obj).values())


def _detail(exc: BaseException) -> str:
    """Return the informative line of a torch.load error (weights-only ones span paragraphs)."""
    text = str(exc)
    marker = 'WeightsUnpickler error:'
    if marker in text:
        text = text.split(marker, 1)[1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return clip(lines[0] if lines else type(exc).__name__, 160)


def _refusal(path: Path, name: str) -> ModelLoadError:
    return ModelLoadError(
        f"{show_path(path)} refused: it names `{clip(name, 80)}`, which is not among the classes "
        'a checkpoint of this architecture contains; unpickling it could run code. Load only '
        'checkpoints you trust, or give the manifest an exported .onnx instead')


def _read(path: Path) -> bytes:
    """Read the file once: its globals are checked in the very bytes that are then loaded."""
    return read_weights(path)


def load_checkpoint(path: Path, allowed: Allowlist) -> Any:
    """Unpickle the checkpoint at ``path``, allowing only the globals in ``allowed``.

    Only ``torch.save`` zip archives
    are read (every Ultralytics checkpoint since 2020): their globals can be listed before
    loading. Raises :class:`ModelLoadError` (one line) for a file that is not one, names a
    global outside ``allowed``, or fails to unpickle.
    """
    import torch

    serialization = torch.serialization
    if not (hasattr(serialization, 'safe_globals')
            and hasattr(serialization, 'get_unsafe_globals_in_checkpoint')):
        raise ModelLoadError(
            f'loading .pt weights safely needs torch >= 2.6 (this is {torch.__version__}): '
            'upgrade torch, or give the manifest an exported .onnx instead')
    data = _read(path)
    try:
        needed = serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - not a torch.save archive, or a broken one
        raise ModelLoadError(
            f"{show_path(path)} is not a PyTorch checkpoint (a torch.save zip archive): "
            f'{_detail(exc)}; check the `weights` path') from None
    refused = [name for name in needed if name not in allowed]
    if refused:
        raise _refusal(path, refused[0])
    entries = [(allowed.resolve(name), name) for name in needed]
    with _LOAD_LOCK, serialization.safe_globals(entries), warnings.catch_warnings():
        warnings.simplefilter('ignore')
        try:
            loaded = torch.load(io.BytesIO(data), map_location='cpu', weights_only=True)
        except pickle.UnpicklingError as exc:
            match = _REFUSED.search(str(exc))
            if match and match.group(1) not in allowed:
                raise _refusal(path, match.group(1)) from None
            raise ModelLoadError(f"{show_path(path)} cannot be unpickled safely "
                                 f'({_detail(exc)}): check the `weights` path') from None
        except Exception as exc:  # noqa: BLE001 - torch raises many types for bad files
            raise ModelLoadError(f"{show_path(path)} is not a readable PyTorch checkpoint "
                                 f'(torch.load: {type(exc).__name__}: {_detail(exc)}): check '
                                 'the `weights` path') from None
    restore_classes(loaded)
    return loaded
