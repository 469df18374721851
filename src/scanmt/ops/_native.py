"""The native CPU kernels (``_kernels.cpp``): built on first use, or a fallback.

:func:`get` returns the compiled extension module, building it on the first
call on a machine (10-60 s with gcc, one compiler process; then cached on disk,
so that later processes only load it, in about 1 ms plus 0.1 s to import
``torch.utils.cpp_extension``), or ``None``, after logging one warning, if it
cannot be had: ``SCANMT_OPS_NATIVE=0`` in the environment, no C++ compiler or
``ninja``, a build or load error.  The ops then use their PyTorch algorithms,
which give the same results (up to rounding).

The module is built with ``torch.utils.cpp_extension.load`` into
``$TORCH_EXTENSIONS_DIR/scanmt_ops_<hash>`` (default root:
``~/.cache/torch_extensions``), where the hash covers the source, the flags and
the Python and PyTorch versions, so that different versions never share a
build.  Concurrent first use is safe: threads of one process wait on a lock;
processes take an exclusive ``flock`` on ``scanmt.lock`` in the build directory
around the build or load (released by the OS if a process dies, unlike the
lock file of ``cpp_extension``, which is cleared under that flock if a killed
build left it behind).  An up-to-date build is imported directly, without
running ``ninja``.

Everything here is private to ``scanmt.ops``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import sys
import threading
import time
from typing import Any, Dict, Optional

import torch

_log = logging.getLogger(__name__)

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_kernels.cpp")
CFLAGS = ["-O3", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd"]
#: the environment variable that disables the kernels ("0", "false", "off", "no")
ENV = "SCANMT_OPS_NATIVE"

_lock = threading.Lock()
_tried = False
_module: Optional[Any] = None
_info: Dict[str, Any] = {"available": False, "reason": "not loaded yet"}


def get() -> Optional[Any]:
    """The native module, or ``None`` (disabled or failed: see :func:`info`)."""
    if _tried:
        return _module
    return _load()


def info() -> Dict[str, Any]:
    """``available``, ``reason`` (why not), ``seconds`` (build or load time),
    ``built`` (whether this process compiled it), ``path``."""
    return dict(_info)


def disabled_by_env() -> bool:
    return os.environ.get(ENV, "1").strip().lower() in ("0", "false", "off", "no")


def _load() -> Optional[Any]:
    global _tried, _module, _info
    with _lock:
        if _tried:
            return _module
        t0 = time.perf_counter()
        try:
            if disabled_by_env():
                raise _Unavailable(f"disabled by {ENV}={os.environ.get(ENV)}")
            module, built, path = _build_or_import()
            _module = module
            _info = {
                "available": True,
                "reason": "",
                "seconds": time.perf_counter() - t0,
                "built": built,
                "path": path,
            }
            _log.info("scanmt.ops: native CPU kernels %s in %.1f s (%s)", "built" if built else "loaded",
                      _info["seconds"], path)
        except Exception as e:  # noqa: BLE001 - any failure means: use the PyTorch path
            reason = str(e).strip() or type(e).__name__
            if not isinstance(e, _Unavailable):
                reason = f"{type(e).__name__}: {reason}"
            lines = reason.splitlines()
            short = lines[0] + (f" ... ({len(lines) - 1} more lines)" if len(lines) > 1 else "")
            _module = None
            _info = {"available": False, "reason": short, "seconds": time.perf_counter() - t0, "details": reason}
            _log.warning("scanmt.ops: native CPU kernels unavailable, using the PyTorch implementation (%s)", short)
        finally:
            _tried = True
        return _module


class _Unavailable(RuntimeError):
    pass


def _key() -> str:
    h = hashlib.sha256()
    with open(SOURCE, "rb") as f:
        h.update(f.read())
    h.update(repr((CFLAGS, sys.version_info[:2], torch.__version__, sys.platform)).encode())
    return h.hexdigest()[:16]


def _build_or_import():
    from torch.utils import cpp_extension

    name = f"scanmt_ops_{_key()}"
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    build_dir = os.path.join(root, name)
    os.makedirs(build_dir, exist_ok=True)
    so_path = os.path.join(build_dir, name + (".pyd" if sys.platform == "win32" else ".so"))
    with _ProcessLock(os.path.join(build_dir, "scanmt.lock")) as locked:
        if os.path.exists(so_path):
            try:
                return _import(name, so_path), False, so_path
            except ImportError as e:  # e.g. a build killed while linking: rebuild
                _log.warning("scanmt.ops: could not import %s (%s); rebuilding", so_path, e)
                os.remove(so_path)
        _log.info("scanmt.ops: compiling the native CPU kernels of sparsemax, csoftmax and csparsemax in %s "
                  "(once per machine, up to about a minute; later runs load them at once)", build_dir)
        stale = os.path.join(build_dir, "lock")  # cpp_extension's own lock file
        if locked and os.path.exists(stale):
            os.remove(stale)  # we hold the flock: its owner died during a build
        old_path = os.environ.get("PATH", "")
        if shutil.which("ninja") is None:
            try:  # the pip package's binary, when its environment is not activated
                import ninja  # type: ignore

                os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + old_path
            except ImportError:
                pass
        try:
            module = cpp_extension.load(
                name=name,
                sources=[SOURCE],
                extra_cflags=CFLAGS,
                build_directory=build_dir,
                verbose=False,
            )
        finally:
            os.environ["PATH"] = old_path
    return module, True, so_path


def _import(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _ProcessLock:
    """An exclusive ``flock`` on ``path`` (a no-op where ``fcntl`` is missing)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fh = None

    def __enter__(self) -> bool:
        try:
            import fcntl
        except ImportError:
            return False
        self.fh = open(self.path, "a")
        fcntl.flock(self.fh.fileno(), fcntl.LOCK_EX)
        return True

    def __exit__(self, *exc) -> None:
        if self.fh is not None:
            import fcntl

            fcntl.flock(self.fh.fileno(), fcntl.LOCK_UN)
            self.fh.close()
