"""Hostile files for the tests of what the node reads: image headers, model folders.

Not a test module: test_model_files, test_fuzz_files and test_tensorrt import it.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any, Callable


def png_header(width: int, height: int, depth: int = 8, color: int = 2) -> bytes:
    """Return a PNG signature and IHDR chunk (valid CRC) claiming any image size."""
    body = b'IHDR' + struct.pack('>IIBBBBB', width, height, depth, color, 0, 0, 0)
    return (b'\x89PNG\r\n\x1a\n' + struct.pack('>I', 13) + body
            + struct.pack('>I', zlib.crc32(body)))


def jpeg_header(width: int, height: int, components: int = 3) -> bytes:
    """Return a JPEG's start, frame header and scan header claiming any image size."""
    frame = struct.pack('>BHHB', 8, height, width, components) + b''.join(
        bytes((i + 1, 0x11, 0)) for i in range(components))
    scan = bytes((components,)) + b''.join(bytes((i + 1, 0)) for i in range(components)) \
        + b'\x00\x3f\x00'
    return (b'\xff\xd8' + b'\xff\xc0' + struct.pack('>H', len(frame) + 2) + frame
            + b'\xff\xda' + struct.pack('>H', len(scan) + 2) + scan)


def model_folder(folder: Path, source: Path, config: dict[str, Any] | None = None) -> Path:
    """Make a save_pretrained folder: ``source``'s weights linked, its config or ``config``."""
    folder.mkdir(parents=True)
    os.symlink(source / 'model.safetensors', folder / 'model.safetensors')
    data = config if config is not None else json.loads((source / 'config.json').read_text())
    (folder / 'config.json').write_text(json.dumps(data))
    return folder


def replace_file(path: Path, make: Callable[[Path], None]) -> None:
    """Remove what is at ``path`` and let ``make`` put something else there."""
    if path.is_symlink() or path.exists():
        path.unlink()
    make(path)


def _sparse(path: Path) -> None:
    with open(path, 'wb') as fh:
        fh.truncate(1 << 40)


#: Ways to put something other than a readable regular file where a file is read.
SPECIAL_FILES: dict[str, Callable[[Path], None]] = {
    'fifo': os.mkfifo,
    'dev_zero': lambda p: os.symlink('/dev/zero', p),
    'dev_urandom': lambda p: os.symlink('/dev/urandom', p),
    'folder': lambda p: p.mkdir(),
    'dangling': lambda p: os.symlink('no-such-target', p),
    'sparse': _sparse,
}
