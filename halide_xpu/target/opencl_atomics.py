"""Halide's OpenCL C compare-and-swap loops made to read the element once (kernel objects patched in place).

Halide writes an atomic float (or 64-bit) update as::

    do {
      old_val.f = _out[_483];
      float _484 = _out[_462];        // the update's own read of the element, at an index simplified apart
      float _485 = _484 + _463;
      new_val.f = _485;
    } while(atomic_cmpxchg((volatile ... unsigned int*)&_out[_483], old_val.i, new_val.i) != old_val.i);

Two plain loads of one element: a compiler may issue the second first, and then the swap succeeds with a sum made
from a stale value, losing another work-item's addition (``index_add`` along a dim of 17 into 5 bins on the OpenCL
CPU device: one element of 33,000 off now and then, ``graph_fuzz`` seed 7090). Here every read of the swapped
buffer inside the loop becomes ``old_val.f``: the value the swap compares. The source is a NUL-terminated string in
the kernel object's ``.rodata``; each rewritten line keeps its length (padded with spaces), so the object is patched
byte for byte and Halide's runtime builds the corrected source.
"""
from __future__ import annotations

import logging
import re
from pathlib import Path

log = logging.getLogger(__name__)

_LOOP = re.compile(rb"do \{\n(?P<body>(?:(?!\} while).)*?)\} while\(atomic_cmpxchg\(\(volatile [^*]*\*\)&(?P<buf>\w+)\[",
                   re.S)


def rewrite_cas_loops(source: bytes) -> tuple[bytes, int]:
    """``source`` with each compare-and-swap loop's reads of its buffer replaced by ``old_val.f`` (same length);
    and how many reads were replaced."""
    count = 0

    def loop(m: re.Match) -> bytes:
        buf = re.escape(m.group("buf"))
        read = re.compile(rb"^(?P<head>[ \t]*\w+ _\d+ = )(?P<load>" + buf + rb"\[[^\]\n]+\]);$", re.M)

        def one(r: re.Match) -> bytes:
            nonlocal count
            new = b"old_val.f;"
            old = r.group("load") + b";"
            if len(new) > len(old):
                raise ValueError(f"a compare-and-swap read too short to rewrite in place: {old!r}")
            count += 1
            return r.group("head") + new + b" " * (len(old) - len(new))

        start, end = m.start("body") - m.start(), m.end("body") - m.start()
        whole = m.group(0)
        return whole[:start] + read.sub(one, m.group("body")) + whole[end:]

    return _LOOP.sub(loop, source), count


def patch_object(obj: Path) -> int:
    """Rewrite the compare-and-swap loops of the OpenCL C embedded in kernel object ``obj``, in place; returns the
    number of reads replaced (0: no such loop, the object untouched)."""
    data = obj.read_bytes()
    if b"atomic_cmpxchg" not in data:
        return 0
    patched, count = rewrite_cas_loops(data)
    if count:
        assert len(patched) == len(data), "the OpenCL C changed length"
        obj.write_bytes(patched)
        log.debug("halide_xpu: %s: %d compare-and-swap reads now read the swapped value", obj, count)
    return count
