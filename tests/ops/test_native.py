"""The native CPU kernels: selection, fallback, layout independence, invalid input.

Their results are checked against the oracle, and their gradients, together
with the PyTorch path in the other test files (``method="native"`` or
``path="native"``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch

from . import oracle
from .cases import make_case
from scanmt.ops import FEASIBILITY_TOL, NEGATIVE_TOL, _checks, _native, csoftmax, csparsemax, sparsemax

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")
FNS = {"sparsemax": sparsemax, "csparsemax": csparsemax, "csoftmax": csoftmax}


def call(op, z, u, **kw):
    return sparsemax(z, **kw) if op == "sparsemax" else FNS[op](z, u, **kw)


def run_python(code: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (one thread, scanmt from this checkout)."""
    full_env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.path.abspath(SRC))
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True, text=True, timeout=timeout
    )


# A child process: reports what _native decided and checks that the ops still
# give the oracle's answer (on the PyTorch path) and that forcing "native" fails.
FALLBACK_CHILD = """
    import json, numpy as np, torch
    from scanmt.ops import _checks, _native, csparsemax
    z = torch.tensor([[1.2, 0.8, -0.2]])
    p = csparsemax(z, torch.tensor([[0.5, 1.0, 1.0]]))
    forced = "no error"
    try:
        with _checks.use_method("native"):
            csparsemax(z, torch.ones(1, 3))
    except RuntimeError as e:
        forced = str(e)
    print(json.dumps({"module": _native.get() is not None, "info": {k: str(v) for k, v in _native.info().items()},
                      "p": p.tolist(), "forced": forced, "auto": _checks.native_kernels(z) is not None}))
"""


def _check_fallback(proc: subprocess.CompletedProcess, reason_part: str) -> None:
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["module"] is False and out["auto"] is False
    assert out["info"]["available"] == "False"
    assert reason_part in out["info"]["reason"], out["info"]
    np.testing.assert_allclose(out["p"], [[0.5, 0.5, 0.0]], atol=1e-6)
    assert "the native kernels are unavailable" in out["forced"]
    # exactly one warning from scanmt, with the reason
    warnings = [line for line in proc.stderr.splitlines() if "native CPU kernels unavailable" in line]
    assert len(warnings) == 1, proc.stderr
    assert reason_part in warnings[0]


def test_fallback_when_disabled_by_environment():
    proc = run_python(FALLBACK_CHILD, {"SCANMT_OPS_NATIVE": "0"})
    _check_fallback(proc, "SCANMT_OPS_NATIVE=0")


def test_fallback_when_the_build_fails(tmp_path):
    """No usable compiler (CXX points nowhere): one warning, then the PyTorch path."""
    env = {"SCANMT_OPS_NATIVE": "1", "TORCH_EXTENSIONS_DIR": str(tmp_path), "CXX": str(tmp_path / "no-such-c++")}
    proc = run_python(FALLBACK_CHILD, env)
    _check_fallback(proc, "RuntimeError")


def test_stale_build_lock_is_cleared(tmp_path):
    """A build killed half-way leaves cpp_extension's lock file behind, on which
    later processes would wait forever; scanmt clears it under its own flock."""
    build_dir = tmp_path / f"scanmt_ops_{_native._key()}"
    build_dir.mkdir()
    (build_dir / "lock").write_text("")
    env = {"SCANMT_OPS_NATIVE": "1", "TORCH_EXTENSIONS_DIR": str(tmp_path), "CXX": str(tmp_path / "no-such-c++")}
    proc = run_python(FALLBACK_CHILD, env, timeout=120)  # (a wait on the lock would time out)
    _check_fallback(proc, "RuntimeError")


@pytest.mark.skipif(
    os.environ.get("SCANMT_OPS_BUILD_TEST", "1") == "0",
    reason="SCANMT_OPS_BUILD_TEST=0: skips compiling the native kernels from scratch in 3 processes (20-40 s)",
)
def test_concurrent_first_use_builds_once(tmp_path):
    """Several processes that need the kernels at the same time: one builds, the
    others wait and load its result; all of them end up with working kernels."""
    child = """
        import json, time, torch
        from scanmt.ops import _native, csparsemax
        t = time.time()
        m = _native.get()
        p = csparsemax(torch.tensor([[1.2, 0.8, -0.2]]), torch.tensor([[0.5, 1.0, 1.0]]))
        print(json.dumps({"ok": m is not None, "built": _native.info().get("built"), "p": p.tolist(),
                          "seconds": time.time() - t}))
    """
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.path.abspath(SRC), TORCH_EXTENSIONS_DIR=str(tmp_path))
    env.pop("SCANMT_OPS_NATIVE", None)
    procs = [
        subprocess.Popen([sys.executable, "-c", textwrap.dedent(child)], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outs = [json.loads(p.communicate(timeout=900)[0].strip().splitlines()[-1]) for p in procs]
    assert all(o["ok"] for o in outs), outs
    assert sorted(o["built"] for o in outs) == [False, False, True], outs
    for o in outs:
        np.testing.assert_allclose(o["p"], [[0.5, 0.5, 0.0]], atol=1e-6)


# ----------------------------------------------------------------------------
# in-process (skipped where the kernels are unavailable)
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["native"])
def test_automatic_selection(path):
    cpu = torch.zeros(2, 3)
    assert _checks.native_kernels(cpu) is _native.get() is not None
    with _checks.use_native(False):
        assert _checks.native_kernels(cpu) is None
    for method in ("dense", "iter", "sort"):
        with _checks.use_method(method):
            assert _checks.native_kernels(cpu) is None
    with _checks.use_method("native"), _checks.use_native(False):
        assert _checks.native_kernels(cpu) is not None
    assert _native.info()["available"] is True


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("op", ["sparsemax", "csparsemax", "csoftmax"])
@pytest.mark.parametrize("path", ["native"])
def test_results_do_not_depend_on_layout_or_other_rows(path, op, dtype):
    """Bitwise: a row alone or anywhere in a batch, contiguous or strided, with
    u broadcast or materialised, with an all-True mask or none."""
    z, u, _ = make_case("nmt", 40, 37, seed=11)
    zt, ut = torch.tensor(z, dtype=dtype), torch.tensor(u, dtype=dtype)
    with _checks.use_method("native"):
        ref = call(op, zt, ut)
        for i in (0, 17, 39):
            assert torch.equal(call(op, zt[i : i + 1], ut[i : i + 1]), ref[i : i + 1])
        shuffled = torch.randperm(40)
        assert torch.equal(call(op, zt[shuffled], ut[shuffled]), ref[shuffled])
        # transposed storage, normalised along dim 0
        assert torch.equal(call(op, zt.t().contiguous(), ut.t().contiguous(), dim=0), ref.t())
        assert torch.equal(call(op, zt, ut, mask=torch.ones(40, 37, dtype=torch.bool)), ref)
        # one bound vector broadcast over the rows (stride 0)
        row_u = ut[3]
        assert torch.equal(call(op, zt, row_u), call(op, zt, row_u.expand(40, 37).contiguous()))


@pytest.mark.parametrize("op", ["sparsemax", "csparsemax", "csoftmax"])
@pytest.mark.parametrize("path", ["native"])
def test_invalid_rows_are_counted_and_do_not_spoil_the_others(path, op):
    """validate=False: NaN/+inf rows give NaN, infeasible rows p = u, the others the
    right answer; the kernels report how many rows were invalid."""
    kernels = _native.get()
    z, u, mask = make_case("random", 12, 9, seed=3)
    z[2, 4], z[5, 0], u[7, 1] = np.nan, np.inf, np.nan
    u[9] = 0.05  # infeasible
    u[10, 2] = -1.0  # negative
    zt, ut = torch.tensor(z), torch.tensor(u)
    if op == "sparsemax":
        p, n_invalid = kernels.sparsemax_forward(zt, None)
        bad = {2, 5}
    else:
        p, _, n_invalid = getattr(kernels, op + "_forward")(zt, ut, None, FEASIBILITY_TOL, NEGATIVE_TOL)
        bad = {2, 5, 7}
        torch.testing.assert_close(p[9], ut[9], rtol=0, atol=0)
    assert n_invalid == (2 if op == "sparsemax" else 5)
    for i in range(12):
        if i in bad:
            assert torch.isnan(p[i]).all()
        elif op == "sparsemax":
            np.testing.assert_allclose(p[i].numpy(), oracle.sparsemax(z[i]), atol=1e-12)
        elif i not in (9, 10):
            np.testing.assert_allclose(p[i].numpy(), getattr(oracle, op)(z[i], u[i]), atol=1e-12)
    # and the public functions raise for them, as on the PyTorch path
    with _checks.use_method("native"), pytest.raises(ValueError):
        call(op, zt, ut)
    out = call(op, zt, ut, validate=False)
    assert out.shape == zt.shape


@pytest.mark.parametrize("path", ["native"])
def test_threads_share_the_kernels(path):
    """The kernels release the GIL; concurrent calls from Python threads are safe."""
    z, u, _ = make_case("tight", 300, 30, seed=5)
    zt, ut = torch.tensor(z, dtype=torch.float32), torch.tensor(u, dtype=torch.float32)
    with _checks.use_method("native"):
        ref = csparsemax(zt, ut)
    results, errors = [], []

    def work():
        try:
            for _ in range(20):
                results.append(torch.equal(csparsemax(zt, ut), ref))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    # one use_method around all threads: the forced method is a process-wide setting, and a context per thread
    # could restore another thread's "native" and leak it into later tests
    with _checks.use_method("native"):
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert _checks._FORCED_METHOD is None
    assert not errors and len(results) == 80 and all(results)


@pytest.mark.parametrize("path", ["native"])
def test_kernel_argument_checks(path):
    kernels = _native.get()
    z = torch.zeros(2, 3)
    with pytest.raises(RuntimeError, match="dtype of z"):
        kernels.csparsemax_forward(z, torch.zeros(2, 3, dtype=torch.float64), None, 1e-5, 1e-6)
    with pytest.raises(RuntimeError, match="shape of z"):
        kernels.csoftmax_forward(z, torch.zeros(3, 2), None, 1e-5, 1e-6)
    with pytest.raises(RuntimeError, match="bool"):
        kernels.sparsemax_forward(z, torch.ones(2, 3))
    with pytest.raises(RuntimeError, match="float32 or float64"):
        kernels.sparsemax_forward(z.half(), None)
