"""A run's log gets, after each step's ``=== stage: command line``, exactly what ``scanmt COMMAND`` prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from scanmt import api
from scanmt.cli.main import main
from scanmt.config import DecodeConfig
from scanmt.experiments import worker

TRAIN = api.TrainResult(
    out=Path("runs/x"), stop_reason="max steps (200)", step=200, epochs=3, parameters=123456, seconds=90.0,
    tokens=45000, best_bleu=12.345, best_step=100, last_valid_ppl=17.5, is_main=True, world_size=1,
    replica_divergence=None,
)
TUNE = api.TunePenaltiesResult(
    alphas=[0.0, 0.5], betas=[0.0, 0.2], bleu={(0.0, 0.0): 10.0, (0.0, 0.2): 11.5, (0.5, 0.0): 9.0, (0.5, 0.2): 11.0},
    best=(0.0, 0.2), out=Path("runs/x/penalties.yaml"), sentences=50, penalty_mode="rescore", coverage_eps=0.1,
    beam_searches=1, reranked=True, encode_seconds=0.5, seconds=2.0,
)


def step_log(capsys, request, what: str) -> str:
    """What :func:`worker._step` printed after its header line."""
    worker._step(request, what)
    header, _, rest = capsys.readouterr().out.partition("\n=== " + what + ": " + request.command_line() + "\n")
    assert header == ""
    return rest


def cli_out(capsys, request) -> str:
    assert main(request.to_argv()) == 0
    return capsys.readouterr().out


def test_train_and_tune_steps_log_the_cli_summaries(monkeypatch, capsys):
    train_req = api.TrainRequest(config="c.yaml", out="runs/x")
    tune_req = api.TunePenaltiesRequest(model="runs/x/best.pt", data=Path("d"), beam=3)
    for module, name, result in (("scanmt.cli.train", "train", TRAIN), ("scanmt.cli.tune_penalties",
                                                                          "tune_penalties", TUNE)):
        monkeypatch.setattr(f"{module}.{name}", lambda request, result=result: result)
    monkeypatch.setitem(worker.STEP_FUNCTIONS, api.TrainRequest, lambda request: TRAIN)
    monkeypatch.setitem(worker.STEP_FUNCTIONS, api.TunePenaltiesRequest, lambda request: TUNE)

    log = step_log(capsys, train_req, "train")
    assert log == cli_out(capsys, train_req)
    assert log.splitlines()[:3] == ["", "training summary (runs/x)", "  stopped:          max steps (200)"]
    assert "  parameters:       123,456\n" in log and "  best valid BLEU:  12.35 (greedy, step 100) -> " in log
    assert "  last valid ppl:   17.50\n" in log and "distributed" not in log

    log = step_log(capsys, tune_req, "tune")
    assert log == cli_out(capsys, tune_req)
    assert log.splitlines()[1:4] == ["alpha \\ beta     0.00    0.20", "-" * 29,
                                     "        0.00   10.00   11.50*"]
    assert "  best: alpha 0, beta 0.2: BLEU 11.50 -> runs/x/penalties.yaml\n" in log


def test_evaluate_step_logs_the_table(tmp_path, capsys):
    hyp, ref = tmp_path / "hyp.en", tmp_path / "ref.en"
    hyp.write_text("a dog runs in the park .\na man is eating .\n", encoding="utf-8")
    ref.write_text("a dog runs in a park .\na man eats .\n", encoding="utf-8")
    request = api.EvaluateRequest(hyp=hyp, ref=ref, metrics=("bleu", "rep"), json=tmp_path / "eval.json")
    log = step_log(capsys, request, "evaluate")
    assert log == cli_out(capsys, request)
    lines = log.splitlines()
    assert lines[0] == f"scanmt evaluate: {hyp} (2 sentences)"
    assert lines[1].split() == ["metric", "value", "note"] and set(lines[2]) == {"-", " "}
    assert [ln.split()[0] for ln in lines[3:-1]] == ["BLEU", "REP"]
    assert lines[-1] == f"results written to {tmp_path / 'eval.json'}" and (tmp_path / "eval.json").exists()


@pytest.mark.parametrize("force, output", [(False, "sparsemax"), (True, "sparsemax"), (False, "softmax")])
def test_translate_summary(force, output):
    """A sparse output's support and exact searches; nothing of them for a softmax (every word has a
    probability: the vocabulary is its support) or forced decoding (issue 52, item 18)."""
    from scanmt.decoding.search import Hypothesis

    class T:  # a translation as far as the summary reads it
        pieces = ["a", "b"]
        src_pieces = ["x", "y", "z"]
        hypothesis = Hypothesis([1, 2], -1.0, -1.0, None, support=[3, 2, 1], exact=True)

    decode = DecodeConfig()
    request = api.TranslateRequest(model="m.pt", input="-", output="o.en", attention_out="o.npz",
                                   force_target="t.en" if force else None)
    text = api.TranslateResult([T(), T()], 0 if force else 5, decode, 2.0, output).summary(request)
    lines = text.splitlines()
    assert lines[0] == "translated 2 sentences from <stdin> -> o.en"
    assert lines[1] == ("  decoding: forced (log-probabilities written)" if force else
                        f"  decoding: beam 5, length alpha {decode.length_alpha:g}, coverage beta "
                        f"{decode.coverage_beta:g} (eps {decode.coverage_eps:g}), penalties: {decode.penalty_mode}, "
                        f"output length 1 to 2 x source + 10")
    search = [] if force or output == "softmax" else [
        "  output sparsemax: mean support 2.00 words per step; search exact for 2/2 sentences (100.0%)"]
    # forced decoding: the target file's perplexity, exp(2 / 6) over two sentences of log P = -1 and 3 subwords
    ppl = ["  perplexity: 1.40 over 6 target subwords (with one </s> a sentence)"] if force else []
    assert lines[2:] == ["  time: 2.0 s, 1.0 sentences/s, 3 tokens/s", *ppl, *search, "  attention: o.npz"]


def test_forced_summary_of_a_zero_probability_target_says_infinite():
    """A sparse output can give a target word probability 0: log P = -inf, no perplexity to print."""
    from scanmt.decoding.search import Hypothesis

    class T:
        pieces = ["a", "b"]
        src_pieces = ["x", "y"]
        hypothesis = Hypothesis([1, 2], float("-inf"), float("-inf"), None)

    request = api.TranslateRequest(model="m.pt", input="-", output="o.en", force_target="t.en")
    result = api.TranslateResult([T()], 0, DecodeConfig(), 1.0, "sparsemax")
    assert result.perplexity == float("inf")
    assert "  perplexity: infinite (the model gives a target word probability 0, as a sparse output can)" in (
        result.summary(request).splitlines())


@pytest.mark.parametrize("alpha, hint", [(0.0, True), (1.0, False)])
def test_translate_summary_names_the_short_outputs(alpha, hint):
    """An output under a third of its source's subwords (sources of 6 or more) is named by its line, with the length
    penalty as the hint where a beam ran without one (docs/kftt.md: "27.袋井宿..." -> "27")."""
    from scanmt.api.translate import short_outputs
    from scanmt.decoding.search import Hypothesis

    def t(n_src: int, n_out: int):
        class T:
            pieces = ["w"] * n_out
            src_pieces = ["s"] * n_src
            hypothesis = Hypothesis([1] * n_out, -1.0, -1.0, None, exact=True)
        return T()

    # line 2: 1 of 13 subwords; line 3: 4 of 12 is not under a third; line 4: a 5-subword source is not checked
    outs = [t(8, 7), t(13, 1), t(12, 4), t(5, 1), t(6, 1)]
    request = api.TranslateRequest(model="m.pt", input="in.ja", output="o.en")
    text = api.TranslateResult(outs, 5, DecodeConfig(length_alpha=alpha), 2.0, "softmax").summary(request)
    line = next(x for x in text.splitlines() if x.startswith("  short outputs:"))
    assert line.startswith("  short outputs: 2 of 5 have fewer than a third of their source's subwords (lines 2, 5)")
    assert ("try --length-alpha" in line) == hint
    assert short_outputs(outs) == [1, 4]
    # forced decoding and outputs of normal length say nothing of it
    forced = api.TranslateRequest(model="m.pt", input="in.ja", output="o.en", force_target="t.en")
    assert "short outputs" not in api.TranslateResult(outs, 0, DecodeConfig(), 2.0, "softmax").summary(forced)
    assert "short outputs" not in api.TranslateResult([t(8, 7)], 5, DecodeConfig(), 2.0, "softmax").summary(request)
