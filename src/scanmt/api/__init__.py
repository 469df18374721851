"""The library under the commands: one function per ``scanmt`` command, typed requests in, typed results out.

A whole experiment from Python (a notebook, a script)::

    from scanmt import api
    from scanmt.config import Config

    api.prepare(api.PrepareRequest(pair="de-en", out="runs/data", corpus="multi30k"))
    cfg = Config()                      # or Config.load("configs/cpu-small.yaml", ["train.max_steps=100"])
    cfg.data.dir = "runs/data"
    run = api.train(cfg, "runs/softmax")
    out = api.translate(["Ein Hund läuft."], run.best_checkpoint, beam=5)
    print(out[0].text)

Every request is a frozen dataclass whose fields are the command's options;
``request.to_argv()`` gives the equivalent ``scanmt`` arguments (``command_line()``
the shell line), and ``scanmt.cli.COMMAND.request_from_args`` parses them back.

============================  ==============================  ======================================
function                      takes                           returns
============================  ==============================  ======================================
:func:`prepare`               :class:`PrepareRequest`         :class:`PrepareResult`
:func:`train`                 ``Config`` + run folder, or     :class:`TrainResult`
                              :class:`TrainRequest`
:func:`translate`             lines + checkpoint              list of ``Translation``
:func:`translate_file`        :class:`TranslateRequest`       :class:`TranslateResult`
:func:`evaluate`              :class:`EvaluateRequest`        :class:`EvaluateResult`
:func:`align`                 :class:`AlignRequest`           train, apply or gold result
:func:`fertility`             :class:`FertilityRequest`       predictor, evaluations or split results
:func:`tune_penalties`        :class:`TunePenaltiesRequest`   :class:`TunePenaltiesResult`
:func:`stress`                :class:`StressRequest`          :class:`StressResult`
:func:`remeasure_boundary`    a stress output folder          :class:`BoundaryRemeasure`
:func:`average`               :class:`AverageRequest`         :class:`AverageResult`
============================  ==============================  ======================================

Every function checks the types of its arguments before any work (:mod:`scanmt.api.arguments`: a one-line
``ConfigError`` naming the argument), and every request its fields when it is built.  Heavy modules (torch, the
model) are imported when a function runs, not here.
"""

from scanmt.api.align import AlignApplyResult, AlignRequest, align
from scanmt.api.align_gold import GoldResult
from scanmt.api.align_train import AlignTrainResult
from scanmt.api.average import AverageRequest, AverageResult, average
from scanmt.api.decode import DecodeOverrides, load_penalties
from scanmt.api.evaluate import EvaluateRequest, EvaluateResult, evaluate
from scanmt.api.fertility import FertilityRequest, FertilitySplit, PredictorTrainResult, fertility
from scanmt.api.prepare import PrepareRequest, PrepareResult, prepare
from scanmt.api.requests import CommandRequest
from scanmt.api.stress import BoundaryRemeasure, StressRequest, StressResult, remeasure_boundary, stress
from scanmt.api.train import TrainRequest, TrainResult, train
from scanmt.api.translate import TranslateRequest, TranslateResult, load_translator, translate, translate_file
from scanmt.api.tune_penalties import TunePenaltiesRequest, TunePenaltiesResult, tune_penalties

__all__ = [
    "AlignApplyResult", "AlignRequest", "AlignTrainResult", "AverageRequest", "AverageResult", "BoundaryRemeasure", "CommandRequest", "DecodeOverrides", "EvaluateRequest",
    "EvaluateResult", "FertilityRequest", "FertilitySplit", "GoldResult", "PredictorTrainResult", "PrepareRequest",
    "PrepareResult", "StressRequest", "StressResult", "TrainRequest", "TrainResult", "TranslateRequest", "TranslateResult", "TunePenaltiesRequest",
    "TunePenaltiesResult", "align", "average", "evaluate", "fertility", "load_penalties", "load_translator", "prepare", "remeasure_boundary", "stress", "train",
    "translate", "translate_file", "tune_penalties",
]
