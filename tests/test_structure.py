"""The package's structure (issue 15): imports point down the layers of ARCHITECTURE.md, the experiment
runner never drives the command line, and no function is longer than 80 lines.

A walk over the package's own source with :mod:`ast` (every ``import``, also inside functions).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "scanmt"

#: top to bottom; a module may import its own layer and the layers below it
LAYERS = ["entry", "cli", "experiments", "api", "training", "decoding", "model", "fertility", "metrics", "viz",
          "data", "ops", "base"]
#: modules placed explicitly (the rest: by their package under scanmt)
PLACED = {
    "scanmt.__main__": "entry",
    "scanmt": "base",
    "scanmt.errors": "base",
    "scanmt.io": "base",
    "scanmt.processes": "base",
    "scanmt.allocator": "base",
    # bounds on oneDNN's per-shape caches (environment variables only)
    "scanmt.shape_caches": "base",
    # running nn.LSTM over a padded batch (torch only): the LSTM encoder and the fertility predictor share it
    "scanmt.packed_lstm": "base",
    # replacing a folder as a whole (an archive's pack): imports only scanmt.errors
    "scanmt.folder_swap": "base",
    "scanmt.config": "base",
    # every closed set of config values, declared once (imports only scanmt.errors)
    "scanmt.choices": "base",
    # the checkpoint file as a plain dict (torch.save/torch.load, checked): fertility loads a predictor without model/
    "scanmt.checkpoint_file": "base",
    "scanmt.presets": "base",
    # the fertility rules are pure (they import only scanmt.errors): config.py checks them when a Config is built
    "scanmt.fertility.rules": "base",
    # numeric ranges of config keys (imports only scanmt.errors)
    "scanmt.ranges": "base",
    # each architecture's config keys and checks, beside it: config.py builds the Config with them
    "scanmt.model.lstm.config": "base",
    "scanmt.model.transformer.config": "base",
}
MAX_FUNCTION_LINES = 80


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str | None:
    """The layer of a ``scanmt`` module (None for other packages)."""
    if module != "scanmt" and not module.startswith("scanmt."):
        return None
    for name in (module, ".".join(module.split(".")[:3]), ".".join(module.split(".")[:2])):
        if name in PLACED:
            return PLACED[name]
    top = module.split(".")[1]
    assert top in LAYERS, f"{module}: no layer for scanmt.{top}: add it to LAYERS or PLACED (and ARCHITECTURE.md)"
    return top


def imports(path: Path, me: str | None = None) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every import in the file (of module ``me``: by default its own name)."""
    me = me or module_name(path)
    package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names if layer_of(f"{mod}.{a.name}") is not None
                    and (SRC.parent / f"{mod}.{a.name}".replace(".", "/")).is_dir()]
    return out


SOURCES = sorted(SRC.rglob("*.py"))


def test_the_walk_sees_the_package():
    assert len(SOURCES) > 50
    assert any(m == "scanmt.cli.main" for m in map(module_name, SOURCES))


def test_imports_point_down_the_layers():
    upward = []
    for path in SOURCES:
        me = module_name(path)
        mine = LAYERS.index(layer_of(me))
        for line, target in imports(path):
            theirs = layer_of(target)
            if theirs is not None and LAYERS.index(theirs) < mine:
                upward.append(f"{path.relative_to(SRC.parent)}:{line}: {me} ({layer_of(me)}) imports {target} ({theirs})")
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def test_upward_import_is_caught(tmp_path):
    """The walk itself: a model module importing the training layer is reported."""
    fake = tmp_path / "probe.py"
    fake.write_text("def f():\n    from ..training import loop\n    import scanmt.ops\n", encoding="utf-8")
    found = [(t, layer_of(t)) for _, t in imports(fake, "scanmt.model.probe")]
    assert found == [("scanmt.training", "training"), ("scanmt.ops", "ops")]
    assert LAYERS.index("training") < LAYERS.index(layer_of("scanmt.model.probe"))


@pytest.mark.parametrize("path", [p for p in SOURCES if module_name(p).startswith("scanmt.experiments")],
                         ids=lambda p: p.name)
def test_experiments_never_drive_the_cli(path):
    text = path.read_text(encoding="utf-8")
    assert "scanmt.cli" not in text and "argparse" not in text, f"{path}: the runner calls scanmt.api, not the CLI"


def test_no_function_over_80_lines():
    long = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(SRC.parent)}:{node.lineno}: {node.name} has {n} lines")
    assert not long, "\n".join(long)


#: what belongs to one architecture: modules, and the attributes of its model (issue 28)
ARCHITECTURE_MODULES = ("scanmt.model.lstm", "scanmt.model.transformer")
ARCHITECTURE_ATTRIBUTES = ("decoder", "encoder", "generator")


def architecture_reaches(path: Path, me: str | None = None) -> list[str]:
    """Where a module outside ``scanmt.model`` imports an architecture's module or reads one of its parts
    (``model.decoder``, ``model.encoder``, ...) instead of the :class:`NMTModel` interface."""
    found = [f"{path.name}:{line}: imports {target}" for line, target in imports(path, me)
             if target.startswith(ARCHITECTURE_MODULES)]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in ARCHITECTURE_ATTRIBUTES:
            found.append(f"{path.name}:{node.lineno}: reads .{node.attr}")
    return found


def test_only_the_model_package_knows_an_architecture():
    """Search, the Translator, training, the API and the runner use the model interface only."""
    reaches = []
    for path in SOURCES:
        me = module_name(path)
        if layer_of(me) not in ("model", "fertility", "metrics", "viz", "data", "ops", "base"):
            reaches += [f"{path.relative_to(SRC.parent)}: {r}" for r in architecture_reaches(path)]
    assert not reaches, "reaches into an architecture's internals:\n" + "\n".join(reaches)


def test_reaching_into_an_architecture_is_caught(tmp_path):
    fake = tmp_path / "probe.py"
    fake.write_text("from scanmt.model.lstm.decoder import LSTMState\n\ndef f(model):\n    return model.decoder.emb\n",
                    encoding="utf-8")
    assert architecture_reaches(fake, "scanmt.decoding.probe") == [
        "probe.py:1: imports scanmt.model.lstm.decoder", "probe.py:4: reads .decoder"]


def test_the_architecture_map_stays_a_map():
    """ARCHITECTURE.md is a one-page map (issue 54): no line over 300 characters, details in docstrings and docs/."""
    text = (SRC.parents[1] / "ARCHITECTURE.md").read_text(encoding="utf-8")
    long = [(i, len(line)) for i, line in enumerate(text.splitlines(), 1) if len(line) > 300]
    assert not long, f"ARCHITECTURE.md: lines over 300 characters (line, length): {long}"


def unresolved_names(text: str) -> list[str]:
    """The dotted ``scanmt.…`` names in ``text`` that name no module, nor an attribute of one."""
    missing = []
    for name in sorted(set(re.findall(r"\bscanmt(?:\.[A-Za-z_]\w*)+", text))):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for attr in parts[i:]:
                obj = getattr(obj, attr, None)
            if obj is None:
                missing.append(name)
            break
    return missing


def test_documented_names_exist():
    """Every ``scanmt.x.y`` that README.md, ARCHITECTURE.md and docs/ name is a module or an attribute of one
    (a module moved by a redesign leaves no dead pointer in the docs)."""
    root = SRC.parents[1]
    pages = [root / "README.md", root / "ARCHITECTURE.md", *sorted((root / "docs").glob("*.md"))]
    missing = {p.name: names for p in pages if (names := unresolved_names(p.read_text(encoding="utf-8")))}
    assert not missing, f"names in the docs that the package does not have (page: names): {missing}"


def test_a_dead_documented_name_is_caught():
    text = "see `scanmt.experiments.report.drop_noise` and `scanmt.experiments.drop_noise`, `scanmt.io.atomic_open`"
    assert unresolved_names(text) == ["scanmt.experiments.drop_noise"]
