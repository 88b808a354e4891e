"""Inductor's compiled kernels carried in a warm-start file, for a machine like the one that made them.

torch's cache artifacts (`torch.compiler.save_cache_artifacts`) hold inductor's FX graph cache and
AOTAutograd's entries, but no binary: a process with an empty inductor cache directory that loads
them still compiles every kernel's C++ again (and the programs that probe the CPU's vector ISAs),
most of a warm first call. The files inductor writes to its cache directory are keyed by content
(`<cache_dir>/<2 chars>/<hash>.so`, the `.cpp` beside it, `fxgraph/...`), so a process that finds
them in its own directory, wherever it is, compiles nothing.

A save carries the files this process wrote to inductor's cache directory since pyframe was
imported, with the fingerprint of the machine that built them: the CPU (architecture, model, the
flags that `-march=native` compiles for), the C++ compiler inductor calls and its version. A load
writes them into the loading process's cache directory only under the same fingerprint (a binary
built for another CPU could stop the process on an instruction it lacks), never over a file there.
"""
from __future__ import annotations

import functools
import io
import os
import platform
import shutil
import subprocess
import tarfile
import tempfile
import time

import torch

_IMPORTED_AT = time.time()  # files written to the cache directory from here on are this process's
_SKIPPED_DIRS = {"locks"}    # (inductor's lock files: made by whoever compiles next)


def _cache_dir() -> str:
    from torch._inductor.runtime.cache_dir_utils import cache_dir  # (imports inductor's runtime only)
    return cache_dir()


@functools.lru_cache(maxsize=None)
def machine_fingerprint() -> str:
    """What a kernel binary built here depends on: the CPU, and the compiler inductor calls."""
    cpu = [platform.machine()]
    try:
        with open("/proc/cpuinfo") as f:
            first = f.read().split("\n\n", 1)[0]
        cpu += [line.split(":", 1)[1].strip() for line in first.splitlines()
                if line.split(":", 1)[0].strip() in ("model name", "flags", "Features")]
    except OSError:
        cpu.append(platform.processor())
    from torch._inductor import config as inductor_config  # (inductor's settings, no compile machinery)
    cxx = next((c for c in inductor_config.cpp.cxx if c), "g++")
    compiler = shutil.which(cxx) or cxx
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                                 timeout=30).stdout.split("\n", 1)[0]
    except (OSError, subprocess.SubprocessError):
        version = "unknown"
    return "\n".join([*cpu, compiler, version, torch.__version__])


def collect() -> bytes | None:
    """The files this process wrote to inductor's cache directory, as a tar archive (None: none)."""
    root = _cache_dir()
    if not os.path.isdir(root):
        return None
    buffer = io.BytesIO()
    count = 0
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for directory, subdirs, files in os.walk(root):
            subdirs[:] = sorted(d for d in subdirs if not (directory == root and d in _SKIPPED_DIRS))
            for name in sorted(files):
                path = os.path.join(directory, name)
                try:
                    if os.path.getmtime(path) < _IMPORTED_AT or not os.path.isfile(path):
                        continue
                except OSError:
                    continue
                tar.add(path, arcname=os.path.relpath(path, root), recursive=False)
                count += 1
    return buffer.getvalue() if count else None


def restore(archive: bytes, fingerprint: str) -> int:
    """Write the archive's files into this process's inductor cache directory, if this machine's
    fingerprint is the one they were built under; a file already there is kept. The number written."""
    if fingerprint != machine_fingerprint():
        return 0
    root = _cache_dir()
    written = 0
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        for member in tar.getmembers():
            name = os.path.normpath(member.name)
            if not member.isfile() or os.path.isabs(name) or name.startswith(".."):
                continue  # (only plain files under the directory)
            target = os.path.join(root, name)
            if os.path.exists(target):
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            data = tar.extractfile(member).read()
            # written whole under another name, then renamed: a process compiling meanwhile sees
            # the kernel complete or not at all
            fd, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".pyframe-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(temporary, member.mode & 0o777 or 0o644)
            os.replace(temporary, target)
            written += 1
    return written
