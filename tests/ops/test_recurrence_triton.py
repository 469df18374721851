"""``bounded_recurrence``'s Triton backend without a GPU: its kernels against the torch backend under
Triton's interpreter (in a child process: see ``interpreter_recurrence.py``), and compiled for an H100
(sm_90) ahead of time, which checks what the interpreter does not (types, loop-carried values, the
lowering of every operation) down to the cubin.

Skipped, with the reason, where Triton is not installed (``pip install -e '.[test]'`` installs it).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .recurrence_cases import CASES

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                reason="triton not installed (pip install -e '.[test]' installs it)")

HERE = Path(__file__).resolve().parent
#: the tests of interpreter_recurrence.py besides its cases
INTERPRETER_EXTRA_TESTS = 4


def test_kernels_match_the_torch_backend_under_the_interpreter() -> None:
    env = dict(os.environ, TRITON_INTERPRET="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error::RuntimeWarning",
           str(HERE / "interpreter_recurrence.py")]
    r = subprocess.run(cmd, env=env, cwd=HERE.parents[1], capture_output=True, text=True, timeout=900)
    tail = (r.stdout[-6000:] + "\n" + r.stderr[-3000:]).strip()
    assert r.returncode == 0, tail
    passed = re.search(r"(\d+) passed", r.stdout)
    assert passed and int(passed.group(1)) == len(CASES) + INTERPRETER_EXTRA_TESTS, tail
    assert "skipped" not in r.stdout.splitlines()[-1], tail


@pytest.mark.parametrize("transform", ["csoftmax", "csparsemax", "centmax"])
def test_kernels_compile_for_an_h100(transform: str) -> None:
    """Forward (every option on) and backward kernels of ``transform`` compiled for sm_90, no GPU needed."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from scanmt.ops._triton import kernels

    tid = {"csoftmax": kernels.CSOFTMAX, "csparsemax": kernels.CSPARSEMAX, "centmax": kernels.CENTMAX}[transform]
    ptr = {"z_ptr": "*bf16", "mask_ptr": "*u8", "alpha_ptr": "*fp64", "dalpha_ptr": "*fp64"}
    scalars = {"T": "i32", "S": "i32", "H": "i32", "exhaustion": "fp32"}
    target = GPUTarget("cuda", 90, 32)
    fwd = dict(TRANSFORM=tid, SHARED=True, HAS_MASK=True, SAVE=True, HAS_ONE=tid == kernels.CENTMAX, BLOCK_G=4,
               BLOCK_S=128, MAX_ITER=256)
    bwd = dict(TRANSFORM=tid, SHARED=True, HAS_MASK=True, HAS_DP=True, BLOCK_G=4, BLOCK_S=128)
    for fn, consts in ((kernels.bounded_forward, fwd), (kernels.bounded_backward, bwd)):
        sig = {n: "constexpr" if n in consts else scalars.get(n) or ptr.get(n, "*fp32") for n in fn.arg_names}
        compiled = triton.compile(ASTSource(fn, sig, consts), target=target, options={"enable_fp_fusion": False})
        assert compiled.asm["cubin"], fn.__name__
