"""How small an attention file can be archived: its weights' bytes under lossless and lossy encodings, side by side.

    python benchmarks/attention_storage.py /work/runs/kftt/runs/softmax/seed1/test.attn.npz

``scanmt experiment archive`` keeps seed 1's attention of the figure pair (:mod:`scanmt.experiments.archive`), an
``.npz`` whose ``attn_i`` arrays (float32 ``[T_i, S_i]``) are deflated one by one.  A dense attention (softmax's)
is most of a run's archive.  This measures what each encoding of the weights would store, against the deflated
float32 the archive stores now:

- lossless: float32 deflated (the archive now), float32 byte-shuffled then deflated (the four bytes of every
  value grouped, as blosc's shuffle filter does), float32 through LZMA (one stream, all sentences);
- lossy: float16 deflated, and 8-bit steps of 1/255 deflated, each with its largest absolute error and the
  weights it turns into exact zeros (a map draws exactly zero white, so these would show as weights the model
  did not give: softmax's smallest weights, which float16 flushes below 2^-25 and 8 bits below 1/510).

One row per encoding: bytes, the ratio to the archive's, the largest error, the non-zero weights it makes zero,
the seconds it took.  Only the weights are counted (the tokens and metadata are the same under every encoding).
"""

from __future__ import annotations

import argparse
import lzma
import time
import zlib
from pathlib import Path
from typing import Callable

import numpy as np


def _shuffled(a: np.ndarray) -> bytes:
    """The bytes of float32 ``a`` grouped by position within a value (all first bytes, then all second, ...)."""
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint8).reshape(-1, 4).T.tobytes()


def _steps(a: np.ndarray) -> np.ndarray:
    """``a`` rounded to the nearest step of 1/255, as uint8."""
    return np.rint(np.clip(a, 0.0, 1.0) * 255).astype(np.uint8)


def _float32(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a, dtype=np.float32).tobytes()


#: per-array encodings, deflated one by one as an .npz entry is: name -> (bytes to deflate, decoded weights)
PER_ARRAY: dict[str, tuple[Callable[[np.ndarray], bytes], Callable[[np.ndarray], np.ndarray]]] = {
    "float32, deflate (the archive now)": (_float32, lambda a: a.astype(np.float32)),
    "float32 byte-shuffled, deflate": (_shuffled, lambda a: a.astype(np.float32)),
    "float16, deflate": (lambda a: a.astype(np.float16).tobytes(), lambda a: a.astype(np.float16).astype(np.float32)),
    "8-bit steps of 1/255, deflate": (lambda a: _steps(a).tobytes(), lambda a: _steps(a).astype(np.float32) / 255),
}


def weights(path: Path) -> list[np.ndarray]:
    """The ``attn_i`` arrays of an attention file, in sentence order."""
    from scanmt.data.attention_file import AttentionFile

    return [s.attention.astype(np.float32) for s in AttentionFile(path)]


def measure(arrays: list[np.ndarray], *, level: int = 6, lzma_preset: int = 1) -> list[dict[str, object]]:
    """One row per encoding: ``name``, ``bytes``, ``ratio`` (to the archive's), ``max_error``, ``zeroed`` (non-zero
    weights decoded as exactly zero), ``seconds``."""
    rows: list[dict[str, object]] = []
    for name, (encode, decode) in PER_ARRAY.items():
        start = time.perf_counter()
        size = sum(len(zlib.compress(encode(a), level)) for a in arrays)
        seconds = time.perf_counter() - start
        decoded = [decode(a) for a in arrays]
        error = max((float(np.abs(d - a).max()) for d, a in zip(decoded, arrays) if a.size), default=0.0)
        zeroed = sum(int(((d == 0) & (a != 0)).sum()) for d, a in zip(decoded, arrays))
        rows.append({"name": name, "bytes": size, "max_error": error, "zeroed": zeroed, "seconds": seconds})
    start = time.perf_counter()
    size = len(lzma.compress(b"".join(_float32(a) for a in arrays), preset=lzma_preset))
    rows.insert(2, {"name": f"float32, LZMA preset {lzma_preset}", "bytes": size, "max_error": 0.0,
                    "zeroed": 0, "seconds": time.perf_counter() - start})
    base = rows[0]["bytes"]
    for row in rows:
        row["ratio"] = row["bytes"] / base if base else float("nan")
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("attention", type=Path, help="an attention file (.npz) of scanmt translate --attention-out")
    ap.add_argument("--level", type=int, default=6, help="deflate level, as numpy's savez_compressed (default 6)")
    ap.add_argument("--lzma-preset", type=int, default=1, help="LZMA preset 0-9 (default 1; 6 takes minutes on 5 MB)")
    args = ap.parse_args(argv)
    arrays = weights(args.attention)
    values = sum(a.size for a in arrays)
    zeros = sum(int((a == 0).sum()) for a in arrays)
    print(f"{args.attention}: {len(arrays)} sentences, {values:,} weights ({4 * values:,} bytes as float32), "
          f"{zeros / max(values, 1):.1%} exactly zero")
    print(f"{'encoding':<36} {'bytes':>11} {'ratio':>6} {'max error':>10} {'made zero':>10} {'seconds':>8}")
    for row in measure(arrays, level=args.level, lzma_preset=args.lzma_preset):
        print(f"{row['name']:<36} {row['bytes']:>11,} {row['ratio']:>6.3f} {row['max_error']:>10.2e} "
              f"{row['zeroed']:>10,} {row['seconds']:>8.2f}")


if __name__ == "__main__":
    main()
