"""pyframe/warm/kernels.py: inductor's compiled kernels carried in a warm-start file, written into
another cache directory only on a machine with the same fingerprint. (The cold and warm processes
with inductor: tests/test_warm_inductor.py, slow.)"""
from __future__ import annotations

import io
import os
import tarfile
import time

import pytest

from pyframe.warm import kernels


@pytest.fixture
def cache_dirs(tmp_path, monkeypatch):
    """Two inductor cache directories: `made` (the saving process's), `found` (the loading one's)."""
    dirs = {"made": tmp_path / "made", "found": tmp_path / "found"}
    current = {"dir": dirs["made"]}
    monkeypatch.setattr(kernels, "_cache_dir", lambda: str(current["dir"]))
    dirs["use"] = lambda name: current.update(dir=dirs[name])
    return dirs


def _write(path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_the_files_written_since_import_travel_to_another_directory(cache_dirs, monkeypatch):
    made = cache_dirs["made"]
    _write(made / "ab" / "old.so", b"from an earlier process")
    os.utime(made / "ab" / "old.so", (time.time() - 3600,) * 2)
    monkeypatch.setattr(kernels, "_IMPORTED_AT", time.time() - 60)
    _write(made / "ab" / "cabc.so", b"\x7fELF kernel")
    _write(made / "ab" / "cabc.cpp", b"// its source")
    _write(made / "fxgraph" / "xy" / "entry", b"graph")
    _write(made / "locks" / "cabc.lock", b"")
    archive = kernels.collect()
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        assert sorted(tar.getnames()) == ["ab/cabc.cpp", "ab/cabc.so", "fxgraph/xy/entry"]

    cache_dirs["use"]("found")
    found = cache_dirs["found"]
    _write(found / "ab" / "cabc.cpp", b"// already here")
    assert kernels.restore(archive, kernels.machine_fingerprint()) == 2
    assert (found / "ab" / "cabc.so").read_bytes() == b"\x7fELF kernel"
    assert (found / "fxgraph" / "xy" / "entry").read_bytes() == b"graph"
    assert (found / "ab" / "cabc.cpp").read_bytes() == b"// already here"  # (never written over)
    assert not (found / "ab" / "old.so").exists()


def test_another_machines_kernels_are_not_written(cache_dirs, monkeypatch):
    monkeypatch.setattr(kernels, "_IMPORTED_AT", time.time() - 60)
    _write(cache_dirs["made"] / "ab" / "cabc.so", b"\x7fELF kernel")
    archive = kernels.collect()
    cache_dirs["use"]("found")
    other = kernels.machine_fingerprint().replace("flags", "other flags") + "\nanother CPU"
    assert kernels.restore(archive, other) == 0
    assert not cache_dirs["found"].exists()


def test_an_archive_cannot_write_outside_the_directory(cache_dirs, tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in ("../escaped.so", "/tmp/absolute.so", "ok/kernel.so"):
            info = tarfile.TarInfo(name)
            info.size = 4
            tar.addfile(info, io.BytesIO(b"data"))
    cache_dirs["use"]("found")
    assert kernels.restore(buffer.getvalue(), kernels.machine_fingerprint()) == 1
    assert (cache_dirs["found"] / "ok" / "kernel.so").exists()
    assert not (tmp_path / "escaped.so").exists()


def test_the_fingerprint_names_the_cpu_and_the_compiler():
    fingerprint = kernels.machine_fingerprint()
    assert fingerprint.splitlines()[0]  # the architecture
    assert any("g++" in line or "c++" in line or "clang" in line for line in fingerprint.splitlines())
