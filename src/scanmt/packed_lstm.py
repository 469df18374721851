"""Running an ``nn.LSTM`` over a padded batch: pack, run, unpack, safe under CPU bf16 autocast everywhere.

Both BiLSTMs of the toolkit use it: the LSTM model's encoder (``model/lstm/encoder.py``) and the fertility
predictor (``fertility/predictor/network.py``), which sit in different layers.

Under ``torch.autocast("cpu", dtype=torch.bfloat16)`` on a processor without AVX-512 (a Zen 3 EPYC, KFTT's
thirty-first session), oneDNN cannot build its bf16 LSTM: "could not create a primitive descriptor for the LSTM
forward propagation primitive".  PyTorch takes that path when every sequence of the batch has the same length
(a packed batch whose ``batch_sizes`` are all equal, or a batch of one sentence); batches of mixed lengths run
ATen's own LSTM and pass.  So ``train.precision=bf16`` crashed an LSTM run, or a fertility predictor's training,
at its first batch of equal lengths (``test_resume_accepts_the_changeable_keys`` failed in a fresh-clone CI).
There :func:`run_lstm` runs the LSTM in fp32 and leaves the rest of the model to autocast; bf16 pays off only
with AVX-512 anyway (``training/precision.py`` measured it at 0.05x fp32's speed on that processor).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def onednn_lacks_bf16_lstm(x: torch.Tensor) -> bool:
    """Whether ``nn.LSTM`` on ``x`` would run in bf16 under CPU autocast on a processor without AVX-512, where
    oneDNN cannot build its bf16 LSTM (see the module's docstring)."""
    return (x.device.type == "cpu" and torch.is_autocast_enabled("cpu")
            and torch.get_autocast_dtype("cpu") == torch.bfloat16 and not torch.cpu._is_avx512_supported())


def run_lstm(
    rnn: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """``rnn`` (``batch_first``) over the padded batch ``x``.

    Args:
        rnn: a ``batch_first`` LSTM of ``D`` directions, ``L`` layers and ``H`` units.
        x: ``[B, S, E]`` inputs; positions at or past a sentence's length are ignored.
        lengths: ``[B]`` true lengths (on any device), each in ``1..S``.

    Returns:
        outputs ``[B, S, D*H]`` (zeros at padding) and the final states ``(h, c)``, each ``[D*L, B, H]`` in
        ``nn.LSTM``'s order.  In fp32 where :func:`onednn_lacks_bf16_lstm` holds, else in the dtype autocast gives.
    """
    if onednn_lacks_bf16_lstm(x):
        with torch.autocast("cpu", enabled=False):
            packed = pack_padded_sequence(x.float(), lengths.cpu(), batch_first=True, enforce_sorted=False)
            out, (h, c) = rnn(packed)
    else:
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, (h, c) = rnn(packed)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.size(1))
    return out, (h, c)
