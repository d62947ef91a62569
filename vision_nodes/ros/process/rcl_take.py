"""rcl's take of a serialized message into a reused buffer, through ctypes: one copy fewer.

rclpy's raw take (``Subscription.handle.take_message(type, True)``) has rcl take the message
into a buffer it allocates for the call, copies that into a new Python ``bytes`` and frees
the buffer: for a 2.6 MB frame, a 2.6 MB allocation and copy more than the middleware's own.
:class:`RclTake` calls the same C function, ``rcl_take_serialized_message``, into buffers it
keeps (rcutils byte arrays, allocated with rcutils' default allocator, so that the middleware
may grow one) and lends the message out as a read-only ``memoryview`` of its buffer. The
buffer goes back to the pool when the last view of it is gone, never before: a frame that
something still holds keeps its bytes, and the next take uses another buffer.
``benchmarks/bench_cdr.py`` measures it against rclpy's take: 0.72-0.87 of its time
(docs/benchmarks.md).

The message info is read from ``rmw_message_info_t`` as rclpy reads it (the same keys; an
unsupported sequence number is None). Its layout up to the publisher's GID has been the same
since Humble; only the GID's storage size changed (24 bytes in Humble, 16 since Iron), and
only its first 16 bytes, the DDS GUID, are read; the structure here has room for the larger
one.

Used where the libraries are already loaded in the process (by rclpy: ``RTLD_NOLOAD``, so this
never loads a second copy) and have the functions; :meth:`RclTake.load` returns None
otherwise, and with ``VISION_NODES_RCL_TAKE=0`` in the environment, and the caller takes with
rclpy. The caller holds the subscription's handle during :meth:`RclTake.take`.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

#: ``rcl_ret_t`` values (rcl/types.h).
_RCL_RET_OK = 0
_RCL_RET_SUBSCRIPTION_TAKE_FAILED = 401
#: ``RMW_MESSAGE_INFO_SEQUENCE_NUMBER_UNSUPPORTED``.
_UNSUPPORTED = 2 ** 64 - 1
#: Free buffers kept for later takes; more are freed when given back.
POOL_SIZE = 4


class TakeError(RuntimeError):
    """rcl refused the take (not merely: nothing to take)."""


class _Allocator(ctypes.Structure):
    """``rcutils_allocator_t``."""

    _fields_ = [('allocate', ctypes.c_void_p), ('deallocate', ctypes.c_void_p),
                ('reallocate', ctypes.c_void_p), ('zero_allocate', ctypes.c_void_p),
                ('state', ctypes.c_void_p)]


class _Uint8Array(ctypes.Structure):
    """``rcutils_uint8_array_t`` (``rcl_serialized_message_t``)."""

    _fields_ = [('buffer', ctypes.c_void_p), ('buffer_length', ctypes.c_size_t),
                ('buffer_capacity', ctypes.c_size_t), ('allocator', _Allocator)]


class _MessageInfo(ctypes.Structure):
    """``rmw_message_info_t``, with room for Humble's 24-byte GID and what follows it."""

    _fields_ = [('source_timestamp', ctypes.c_int64), ('received_timestamp', ctypes.c_int64),
                ('publication_sequence_number', ctypes.c_uint64),
                ('reception_sequence_number', ctypes.c_uint64),
                ('implementation_identifier', ctypes.c_char_p),
                ('gid', ctypes.c_uint8 * 16), ('rest', ctypes.c_uint8 * 64)]


class _ErrorString(ctypes.Structure):
    """``rcutils_error_string_t``."""

    _fields_ = [('str', ctypes.c_char * 1024)]


def _loaded(name: str) -> ctypes.CDLL | None:
    """Return the library ``name`` if the process has loaded it already, else None.

    None too where ``dlopen`` has no ``RTLD_NOLOAD`` (Windows): rclpy's take is used there.
    """
    no_load = getattr(os, 'RTLD_NOLOAD', None)
    if no_load is None:
        return None
    try:
        return ctypes.CDLL(name, mode=os.RTLD_NOW | no_load)
    except OSError:
        return None


class _Lease:
    """A taken message's buffer, lent out until the last view of it is gone."""

    __slots__ = ('__array_interface__', '_message', '_pool')

    def __init__(self, message: _Uint8Array, pool: _Pool) -> None:
        self._message, self._pool = message, pool
        self.__array_interface__ = {'version': 3, 'typestr': '|u1',
                                    'shape': (int(message.buffer_length),),
                                    'data': (int(message.buffer), True)}

    def __del__(self) -> None:
        self._pool.give_back(self._message)


class _Pool:
    """Free rcutils buffers: borrowed for a take, given back when its views are gone."""

    def __init__(self, rcutils: ctypes.CDLL) -> None:
        self._init, self._fini = rcutils.rcutils_uint8_array_init, rcutils.rcutils_uint8_array_fini
        self._allocator = rcutils.rcutils_get_default_allocator()
        self._free: list[_Uint8Array] = []
        self._lock = threading.Lock()
        self._closed = False

    def borrow(self) -> _Uint8Array:
        """Return the largest free buffer, or a new empty one (the middleware sizes it)."""
        with self._lock:
            if self._free:
                largest = max(self._free, key=lambda message: message.buffer_capacity)
                self._free.remove(largest)
                return largest
        message = _Uint8Array()
        if self._init(ctypes.byref(message), 0, ctypes.byref(self._allocator)) != 0:
            raise TakeError('cannot initialise a serialized message buffer')
        return message

    def give_back(self, message: _Uint8Array, byref: Any = ctypes.byref) -> None:
        """Keep ``message`` for a later take, or free it (pool full or closed).

        Called from a view's finaliser, on any thread and as late as interpreter exit, so it
        uses nothing but what it holds (``byref`` bound here).
        """
        with self._lock:
            if not self._closed and len(self._free) < POOL_SIZE:
                self._free.append(message)
                return
        self._fini(byref(message))

    def close(self) -> None:
        """Free the free buffers; buffers still lent out are freed when given back."""
        with self._lock:
            self._closed = True
            free, self._free = self._free, []
        for message in free:
            self._fini(ctypes.byref(message))


class RclTake:
    """Take serialized messages with ``rcl_take_serialized_message`` into pooled buffers."""

    def __init__(self, rcl: ctypes.CDLL, rcutils: ctypes.CDLL) -> None:
        """Bind the C functions of the already-loaded ``rcl`` and ``rcutils`` libraries."""
        self._take = rcl.rcl_take_serialized_message
        self._take.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Uint8Array),
                               ctypes.POINTER(_MessageInfo), ctypes.c_void_p]
        self._take.restype = ctypes.c_int
        rcutils.rcutils_get_default_allocator.restype = _Allocator
        rcutils.rcutils_uint8_array_init.argtypes = [
            ctypes.POINTER(_Uint8Array), ctypes.c_size_t, ctypes.POINTER(_Allocator)]
        rcutils.rcutils_uint8_array_init.restype = ctypes.c_int
        rcutils.rcutils_uint8_array_fini.argtypes = [ctypes.POINTER(_Uint8Array)]
        rcutils.rcutils_uint8_array_fini.restype = ctypes.c_int
        rcutils.rcutils_get_error_string.restype = _ErrorString
        rcutils.rcutils_reset_error.restype = None
        self._error_string = rcutils.rcutils_get_error_string
        self._reset_error = rcutils.rcutils_reset_error
        self._pool = _Pool(rcutils)

    @classmethod
    def load(cls) -> RclTake | None:
        """Return a take bound to the process's rcl, or None (the caller takes with rclpy).

        None where ``VISION_NODES_RCL_TAKE`` is 0 (or false), where rcl or rcutils is not
        loaded yet, or where they lack a function this uses.
        """
        if os.environ.get('VISION_NODES_RCL_TAKE', '1').strip().lower() in ('0', 'false'):
            return None
        rcl, rcutils = _loaded('librcl.so'), _loaded('librcutils.so')
        if rcl is None or rcutils is None:
            return None
        try:
            return cls(rcl, rcutils)
        except AttributeError:  # a function missing: an rcl this was not written for
            return None

    def take(self, subscription: int) -> tuple[memoryview, dict[str, Any]] | None:
        """Take the next message of the ``rcl_subscription_t`` at address ``subscription``.

        Returns (its serialized bytes, its info as rclpy gives it), or None when there was
        nothing to take. Raises :class:`TakeError` with rcl's reason when rcl refuses.
        """
        message = self._pool.borrow()
        info = _MessageInfo()
        ret = self._take(subscription, ctypes.byref(message), ctypes.byref(info), None)
        if ret != _RCL_RET_OK:
            self._pool.give_back(message)
            if ret == _RCL_RET_SUBSCRIPTION_TAKE_FAILED:
                return None
            reason = self._error_string().str.decode('utf-8', 'replace')
            self._reset_error()
            raise TakeError(f'rcl could not take a message (error {ret}): {reason}')
        if not message.buffer_length:
            self._pool.give_back(message)
            data = memoryview(b'')
        else:
            data = memoryview(np.asarray(_Lease(message, self._pool)))
        return data, _info(info)

    def close(self) -> None:
        """Free the pooled buffers (those still lent out are freed when their views go)."""
        self._pool.close()


def _info(info: _MessageInfo) -> dict[str, Any]:
    """Return ``info`` as rclpy's take returns the message info."""
    def sequence(value: int) -> int | None:
        return None if value == _UNSUPPORTED else int(value)

    identifier = info.implementation_identifier
    return {'source_timestamp': int(info.source_timestamp),
            'received_timestamp': int(info.received_timestamp),
            'publication_sequence_number': sequence(info.publication_sequence_number),
            'reception_sequence_number': sequence(info.reception_sequence_number),
            'publisher_gid': {
                'implementation_identifier': identifier.decode() if identifier else None,
                'data': bytes(info.gid)}}
