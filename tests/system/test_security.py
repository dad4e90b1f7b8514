"""Security hygiene: no unsafe deserialisation or remote code in the source, crafted checkpoints refused by the real
resume/load paths, names that cannot leave the warehouse or models root, and secrets that come only from the
environment and never reach the warehouse, run metadata or logs."""

from __future__ import annotations

import ast
import io
import json
import logging
import os
import pickle
import secrets as pysecrets
import shutil
import string
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from amrsim.errors import ConfigError, WarehouseError
from tests.helpers import ROOT

# ---------------------------------------------------------------- (a) static scan of the source

SOURCE_DIRS = ("amrsim", "tasks", "flows", "benchmarks")
TORCH_LOADS = {"torch.load", "torch.serialization.load"}
YAML_LOADS = {"yaml.load", "yaml.load_all"}
# calls that run code from the data they read, or from a string, or through a shell
UNSAFE_CALLS = {
    *(f"{m}.{f}" for m in ("pickle", "_pickle", "cPickle", "dill", "cloudpickle")
      for f in ("load", "loads", "Unpickler")),
    "joblib.load", "shelve.open", "marshal.load", "marshal.loads", "pandas.read_pickle", "torch.hub.load",
    "torch.jit.load", "yaml.unsafe_load", "yaml.unsafe_load_all", "yaml.full_load", "yaml.full_load_all",
    "os.system", "os.popen", "eval", "exec", "builtins.eval", "builtins.exec",
}
# keywords that must be absent or the literal False anywhere (calls and dict literals)
FORBIDDEN_FLAGS = ("trust_remote_code", "allow_pickle")


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> what it was imported as (`import torch as T` -> T: torch, `from torch import load`)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return names


def _qualname(node: ast.AST, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([aliases.get(node.id, node.id), *reversed(parts)])


def _is_const(node: ast.AST | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def scan_source(source: str, filename: str = "<string>") -> list[str]:
    """'file:line: problem' for each unsafe load, remote-code flag, unsafe YAML load, eval/exec or shell call."""
    tree = ast.parse(source, filename)
    aliases = _aliases(tree)
    found: list[str] = []

    def flag(node: ast.AST, problem: str) -> None:
        found.append(f"{filename}:{getattr(node, 'lineno', 0)}: {problem}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in FORBIDDEN_FLAGS and not _is_const(value, False):
                    flag(node, f"'{key.value}' set in a dict")
        if not isinstance(node, ast.Call):
            continue
        name = _qualname(node.func, aliases)
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        for flag_name in FORBIDDEN_FLAGS:
            if flag_name in kw and not _is_const(kw[flag_name], False):
                flag(node, f"{flag_name}= not False")
        if name in TORCH_LOADS and not _is_const(kw.get("weights_only"), True):
            flag(node, f"{name} without weights_only=True")
        elif name in YAML_LOADS:
            loader = kw.get("Loader", node.args[1] if len(node.args) > 1 else None)
            if "Safe" not in (_qualname(loader, aliases) or "") if loader is not None else True:
                flag(node, f"{name} without a SafeLoader (use yaml.safe_load)")
        elif name in UNSAFE_CALLS:
            flag(node, f"{name}()")
        elif name and name.startswith("subprocess.") and "shell" in kw and not _is_const(kw["shell"], False):
            flag(node, f"{name} with shell=")
    return found


def source_files() -> list[Path]:
    return sorted(p for d in SOURCE_DIRS for p in (ROOT / d).rglob("*.py"))


def test_source_has_no_unsafe_loading_remote_code_or_shell():
    files = source_files()
    assert len(files) > 30 and ROOT / "amrsim" / "stages" / "train" / "common.py" in files  # the scan is not vacuous
    problems = [p for f in files for p in scan_source(f.read_text(encoding="utf-8"), str(f.relative_to(ROOT)))]
    assert problems == []


@pytest.mark.parametrize("snippet", [
    "import torch\nstate = torch.load('x.pt')",
    "import torch\nstate = torch.load('x.pt', weights_only=False)",
    "import torch\nstate = torch.load(\n    path,\n    map_location='cpu',\n)",
    "import torch\nflag = True\nstate = torch.load(path, weights_only=flag)",
    "import torch as T\nstate = T.load(path)",
    "from torch import load\nstate = load(path)",
    "import torch\nstate = torch.serialization.load(path)",
    "import pickle\nobj = pickle.loads(blob)",
    "import pickle\nobj = pickle.load(f)",
    "from pickle import loads\nobj = loads(blob)",
    "import joblib\nclf = joblib.load('model.joblib')",
    "import cloudpickle\nobj = cloudpickle.loads(blob)",
    "import pandas as pd\ndf = pd.read_pickle(path)",
    "import numpy as np\nx = np.load(path, allow_pickle=True)",
    "from transformers import AutoModel\nm = AutoModel.from_pretrained(p, trust_remote_code=True)",
    "kwargs = {'trust_remote_code': True}",
    "import yaml\ncfg = yaml.load(text)",
    "import yaml\ncfg = yaml.load(text, Loader=yaml.Loader)",
    "import yaml\ncfg = yaml.full_load(text)",
    "import yaml\ncfg = yaml.unsafe_load(text)",
    "value = eval(text)",
    "exec(code)",
    "import subprocess\nsubprocess.run(cmd, shell=True)",
    "import os\nos.system(cmd)",
])
def test_scanner_flags_each_violation(snippet):
    assert len(scan_source(snippet)) == 1, snippet


@pytest.mark.parametrize("snippet", [
    "import torch\nstate = torch.load(path, map_location='cpu', weights_only=True)",
    "import yaml\ncfg = yaml.safe_load(text)",
    "import yaml\ncfg = yaml.load(text, Loader=yaml.SafeLoader)",
    "model.eval()",
    "import numpy as np\nx = np.load(path)",
    "import pickle\nblob = pickle.dumps(obj)",
    "import subprocess\nsubprocess.run(['git', 'status'], capture_output=True, check=False)",
    "m = AutoModel.from_pretrained(p, trust_remote_code=False)",
    "import json\ncfg = json.loads(text)",
])
def test_scanner_passes_safe_code(snippet):
    assert scan_source(snippet) == []


# ---------------------------------------------------------------- (b) crafted checkpoints are refused


class _Payload:
    """Unpickling this creates `marker`: what a malicious checkpoint would do with os.system instead."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _write_crafted(path: Path, marker: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"step": 1, "optimizer": _Payload(marker)}, path)


def test_the_crafted_checkpoint_runs_code_when_loaded_unsafely(tmp_path):
    """Control: the payload is live, so the refusals below are meaningful."""
    import torch

    marker = tmp_path / "control-ran"
    _write_crafted(tmp_path / "evil.pt", marker)
    loaded = torch.load(tmp_path / "evil.pt", weights_only=False)
    loaded["optimizer"].close()
    assert marker.exists()


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory) -> Path:
    """A random 2-layer BERT (hidden 64) saved as a sentence-transformers directory (safetensors)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root = tmp_path_factory.mktemp("tiny")
    hf = root / "hf"
    hf.mkdir()
    words = ["the", "cat", "dog", "runs", "sleeps", "red", "blue"]
    (hf / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n",
                                  encoding="utf-8")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=12, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=16)).save_pretrained(hf)
    BertTokenizerFast(vocab=str(hf / "vocab.txt")).save_pretrained(hf)
    model = SentenceTransformer(modules=[Transformer(str(hf), max_seq_length=16), Pooling(64, "mean")], device="cpu")
    model.save(str(root / "st"), create_model_card=False)
    return root / "st"


def test_s3bert_resume_refuses_a_crafted_train_state(tiny_st, tmp_path, one_thread):
    from amrsim.methods.s3bert.train import train_s3bert

    t1 = ["the cat runs", "the dog sleeps", "the red cat", "the blue dog"]
    t2 = ["the dog runs", "the cat sleeps", "the blue cat", "the red dog"]
    y = np.random.default_rng(0).random((4, 3)).astype(np.float32)
    kwargs = dict(batch_size=2, lr=1e-3, warmup=0, epochs=1, eval_every=1, n_aspects=3, aspect_dim=16, device="cpu")
    out = tmp_path / "models" / "s3bert" / "r1"
    stopped = train_s3bert(str(tiny_st), t1, t2, y, None, out, max_steps=1, **kwargs)
    state_file = out / "checkpoint" / "train_state.pt"
    assert not stopped["completed"] and state_file.is_file()

    marker = tmp_path / "ran"
    _write_crafted(state_file, marker)
    with pytest.raises(WarehouseError, match=r"train_state\.pt: refused to load"):
        train_s3bert(str(tiny_st), t1, t2, y, None, out, **kwargs)
    assert not marker.exists()


def test_mse_amr_resume_refuses_a_crafted_train_state(tiny_st, tmp_path, one_thread):
    from amrsim.methods.mse_amr.train import train_mse_amr
    from amrsim.stages.train.mse_amr import Params

    out = tmp_path / "models" / "mse_amr" / "r1"
    marker = tmp_path / "ran"
    triple = {role: {"en": {"text": "a cat", "graph": "(c / cat)"}} for role in ("premise", "entailment",
                                                                               "contradiction")}
    settings = dict(datasets=["nli"], encoder=str(tiny_st.parent / "hf"), device="cpu", batch_size=2, micro_batch=2,
                    epochs=2, min_count=1, max_length=16, pooling="cls")
    stopped = train_mse_amr([triple] * 4, out, Params(max_steps=1, **settings))
    state_file = out / "checkpoint" / "train_state.pt"
    assert not stopped["completed"] and state_file.is_file()
    _write_crafted(state_file, marker)
    with pytest.raises(WarehouseError, match=r"train_state\.pt: refused to load"):
        train_mse_amr([triple] * 4, out, Params(**settings))
    assert not marker.exists()


def _run_with_pickled_weights(tiny_st: Path, run: Path, sub: str, marker: Path, meta: dict) -> None:
    """A trained run whose weights are a crafted pytorch_model.bin instead of model.safetensors."""
    shutil.copytree(tiny_st, run / sub)
    weights = next((run / sub).rglob("model.safetensors"))
    weights.unlink()
    _write_crafted(weights.with_name("pytorch_model.bin"), marker)
    (run / "model.json").write_text(json.dumps({"created_at": "2024-01-01T00:00:00+00:00", **meta}),
                                    encoding="utf-8")


def test_trained_model_loaders_never_unpickle_weights(tiny_st, tmp_path):
    from amrsim.methods.loaders import load_encoder
    from amrsim.methods.mse_amr import AmrEncoder

    root, marker = tmp_path / "models", tmp_path / "ran"
    _run_with_pickled_weights(tiny_st, root / "s3bert" / "r1", "encoder", marker,
                              {"method": "s3bert", "run_id": "r1", "encoder": "encoder"})
    with pytest.raises((OSError, ValueError, pickle.UnpicklingError)):
        load_encoder("s3bert:r1", models_root=root, device="cpu")
    assert not marker.exists()

    hf_run = tmp_path / "mse" / "r1"
    _run_with_pickled_weights(tiny_st.parent / "hf", hf_run, "amr_encoder", marker,
                              {"method": "mse_amr", "run_id": "r1", "amr_encoder": "amr_encoder", "pooling": "cls"})
    with pytest.raises((OSError, ValueError, pickle.UnpicklingError)):
        AmrEncoder.from_run(hf_run, device="cpu")
    assert not marker.exists()


def test_model_json_cannot_point_a_loader_outside_its_run(tiny_st, tmp_path):
    from amrsim.methods.loaders import load_encoder
    from amrsim.methods.mse_amr import AmrEncoder

    root = tmp_path / "models"
    shutil.copytree(tiny_st, tmp_path / "elsewhere")  # a loadable model outside the run
    for method, key in (("s3bert", "encoder"), ("mse_amr", "amr_encoder")):
        run = root / method / "r1"
        run.mkdir(parents=True)
        (run / "model.json").write_text(json.dumps({"method": method, key: "../../../elsewhere"}), encoding="utf-8")
    with pytest.raises(ValueError, match="not inside"):
        load_encoder("s3bert:r1", models_root=root, device="cpu")
    with pytest.raises(ValueError, match="not inside"):
        AmrEncoder.from_run(root / "mse_amr" / "r1", device="cpu")


# ---------------------------------------------------------------- (c) names cannot leave the roots

CONFIG = """
default_pipeline: p
pipelines:
  p:
    datasets:
      {name}:
        path: data.tsv
        kind: pairs
"""


@pytest.mark.parametrize("name", ["..", "../x", "a/b", "/tmp/x", "x/../../y", "~", "d\n", ".hidden", "models"])
def test_config_rejects_dataset_names_that_are_not_one_safe_directory(write_config, tmp_path, name):
    (tmp_path / "data.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t1\n", encoding="utf-8")
    from amrsim.config import load_config

    load_config(write_config(CONFIG.format(name="good_name")))  # the template itself is valid
    with pytest.raises(ConfigError, match="dataset name"):
        load_config(write_config(CONFIG.format(name=json.dumps(name))))


@pytest.mark.parametrize("name", ["..", "../x", "a/b", "/tmp/x", "", "."])
def test_warehouse_table_path_rejects_escaping_names(wh, tmp_path, name):
    import polars as pl

    with pytest.raises(WarehouseError):
        wh.table_path(name, "pairs")
    with pytest.raises(WarehouseError):
        wh.table_path("d", name)
    with pytest.raises(WarehouseError):
        wh.append(name, "lineage_x", pl.DataFrame({"a": [1]}))
    assert not any(p.name == "lineage_x" for p in tmp_path.rglob("*"))


def test_warehouse_table_path_rejects_a_symlink_out_of_the_root(wh, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    wh.root.mkdir(parents=True)
    (wh.root / "evil").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WarehouseError, match="outside the warehouse root"):
        wh.table_path("evil", "pairs")
    assert wh.table_path("good", "pairs") == wh.root / "good" / "pairs"


BAD_RUN_IDS = ["../../x", "..", ".", "a/b", "/tmp/x", "", ".hidden", "run\n", "r" * 200]


@pytest.mark.parametrize("run_id", BAD_RUN_IDS)
def test_run_ids_cannot_leave_the_models_root(wh, tmp_path, run_id):
    from amrsim.stages.train.common import run_dir, training_run, write_request

    with pytest.raises(WarehouseError, match="invalid run id"):
        run_dir(wh, "s3bert", run_id)
    with pytest.raises(WarehouseError, match="invalid run id"):  # `--run-id` reaches the method through here
        training_run(wh, "p", "s3bert", run_id, SimpleNamespace(model_dump=lambda mode: {}))
    with pytest.raises(WarehouseError, match="invalid run id"):
        write_request(wh, "s3bert", run_id, "k", {})
    assert not wh.exists("meta", "lineage")  # rejected before a lineage row was written
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("method", ["../s3bert", "a/b", "..", "S3BERT", ""])
def test_method_names_cannot_leave_the_models_root(wh, method):
    from amrsim.stages.train.common import run_dir

    with pytest.raises(WarehouseError, match="invalid method name"):
        run_dir(wh, method, "r1")


def test_run_dir_accepts_generated_ids_and_rejects_a_symlink_out(wh, tmp_path):
    from amrsim.stages.train.common import run_dir
    from amrsim.warehouse.lineage import new_run_id

    rid = new_run_id()
    assert run_dir(wh, "s3bert", rid) == wh.models_root / "s3bert" / rid
    assert run_dir(wh, "mse_amr", "run-a.2") == wh.models_root / "mse_amr" / "run-a.2"
    outside = tmp_path / "outside"
    outside.mkdir()
    (wh.models_root / "s3bert").mkdir(parents=True)
    (wh.models_root / "s3bert" / "r1").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WarehouseError, match="resolves outside"):
        run_dir(wh, "s3bert", "r1")


def test_a_symlinked_run_directory_outside_the_models_root_is_refused_when_loading(tiny_st, tmp_path):
    from amrsim.encoders import find_trained, model_id
    from amrsim.methods.loaders import load_encoder

    root, outside = tmp_path / "wh" / "models", tmp_path / "outside"
    shutil.copytree(tiny_st, outside / "encoder")  # a loadable model, so only the path check can refuse it
    (outside / "model.json").write_text(json.dumps({"method": "s3bert", "run_id": "evil", "encoder": "encoder"}),
                                        encoding="utf-8")
    (root / "s3bert").mkdir(parents=True)
    (root / "s3bert" / "evil").symlink_to(outside, target_is_directory=True)
    for name in ("s3bert:evil", "s3bert:latest"):
        for call, kwargs in ((find_trained, {"models_root": root}), (model_id, {"models_root": root}),
                             (load_encoder, {"models_root": root, "device": "cpu"})):
            with pytest.raises(ValueError, match="resolves outside"):
                call(name, **kwargs)
    # a method directory linked out of the root is refused the same way
    (root / "s3bert" / "evil").unlink()
    (root / "s3bert").rmdir()
    (outside / "run").mkdir()
    shutil.move(outside / "model.json", outside / "run" / "model.json")
    shutil.move(outside / "encoder", outside / "run" / "encoder")
    (root / "s3bert").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="resolves outside"):
        find_trained("s3bert:run", root)
    # a symlink that stays inside the root is allowed
    (root / "s3bert").unlink()
    shutil.copytree(outside / "run", root / "store" / "real")
    (root / "s3bert").mkdir()
    (root / "s3bert" / "alias").symlink_to(root / "store" / "real", target_is_directory=True)
    assert find_trained("s3bert:alias", root).path == root / "s3bert" / "alias"


@pytest.mark.parametrize("name", ["s3bert:../../x", "s3bert:../../x/..", "s3bert:..", "../x:r1", "s3bert/../..:x"])
def test_trained_encoder_names_cannot_leave_the_models_root(tmp_path, name):
    from amrsim.encoders import find_trained, model_id
    from amrsim.methods.loaders import load_encoder

    root = tmp_path / "wh" / "models"
    for run in (root / "s3bert" / "r1", tmp_path / "wh" / "x", tmp_path / "x", root / "s3bert"):
        run.mkdir(parents=True, exist_ok=True)  # decoy model.json files where an escaping name would land
        (run / "model.json").write_text(json.dumps({"method": "s3bert", "encoder": "encoder"}), encoding="utf-8")
    assert find_trained("s3bert:r1", root).path == root / "s3bert" / "r1"
    for call in (lambda: find_trained(name, root), lambda: model_id(name, root),
                 lambda: load_encoder(name, models_root=root, device="cpu")):
        with pytest.raises(ValueError):
            call()


# ---------------------------------------------------------------- (d) secrets: environment only, never written

SECRET_WORDS = ("token", "secret", "passw", "credential", "api_key", "apikey", "access_key", "account_key", "auth")


def _config_models() -> list[type]:
    import typing

    from pydantic import BaseModel

    from amrsim.config import ProjectConfig
    from amrsim.methods import METHODS

    seen: list[type] = []

    def walk(model: type) -> None:
        if model in seen:
            return
        seen.append(model)
        for f in model.model_fields.values():
            stack = [f.annotation]
            while stack:
                t = stack.pop()
                if isinstance(t, type) and issubclass(t, BaseModel):
                    walk(t)
                stack.extend(typing.get_args(t))

    walk(ProjectConfig)
    for method in METHODS:
        walk(METHODS[method])
    return seen


def test_no_config_field_holds_a_secret_and_unknown_keys_are_errors():
    from amrsim.secrets import is_secret_name

    models = _config_models()
    assert len(models) > 10
    for model in models:
        assert model.model_config.get("extra") == "forbid", model.__name__
        for name, f in model.model_fields.items():
            for key in {name, f.alias or name}:
                assert not any(w in key.lower() for w in SECRET_WORDS) and not is_secret_name(key), \
                    f"{model.__name__}.{key}: secrets come from the environment, not pipelines.yaml"


@pytest.mark.parametrize("where, text", [
    ("top", "hf_token: hf_abcdefghijklmnopqrstuvwxyz\n"),
    ("pipeline", "    aws_secret_access_key: abcdefgh12345678\n"),
    ("dataset", "        token: hf_abcdefghijklmnopqrstuvwxyz\n"),
    ("params", "    train:\n      - method: s3bert\n        params: {datasets: [d], hf_token: x}\n"),
])
def test_config_rejects_secret_keys(write_config, tmp_path, where, text):
    from amrsim.config import load_config

    (tmp_path / "data.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t1\n", encoding="utf-8")
    body = CONFIG.format(name="d")
    body = text + body if where == "top" else body.replace("        kind: pairs\n", "        kind: pairs\n" + text) \
        if where == "dataset" else body + text
    with pytest.raises(ConfigError, match="unknown key|hf_token"):
        load_config(write_config(body))


def _random(alphabet: str, n: int) -> str:
    return "".join(pysecrets.choice(alphabet) for _ in range(n))


@pytest.fixture
def env_secrets(monkeypatch) -> dict[str, str]:
    values = {
        "HF_TOKEN": "hf_" + _random(string.ascii_letters + string.digits, 34),
        "AWS_SECRET_ACCESS_KEY": _random(string.ascii_letters + string.digits, 40),
        "AWS_ACCESS_KEY_ID": "AKIA" + _random(string.ascii_uppercase + string.digits, 16),
        "AZURE_STORAGE_KEY": _random(string.ascii_letters + string.digits, 44),
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    return values


def test_redact_masks_env_values_and_token_shapes(env_secrets, monkeypatch):
    from amrsim.secrets import MASK, redact, redact_obj

    other_hf = "hf_" + _random(string.ascii_letters, 30)  # token-shaped, not in the environment
    text = (f"401 for {env_secrets['HF_TOKEN']} and {env_secrets['AWS_SECRET_ACCESS_KEY']} "
            f"at https://bob:{_random(string.ascii_letters, 12)}@host/x, also {other_hf}")
    masked = redact(text)
    assert all(v not in masked for v in env_secrets.values()) and other_hf not in masked
    assert masked.startswith(f"401 for {MASK} and {MASK} at https://{MASK}@host/x")
    monkeypatch.setenv("SHORT_TOKEN", "test")  # too short to mask: it would wreck ordinary words
    assert redact("the test split") == "the test split" and redact(None) is None
    nested = redact_obj({"a": [env_secrets["AZURE_STORAGE_KEY"], 3], env_secrets["HF_TOKEN"]: (1, "ok")})
    assert nested == {"a": [MASK, 3], MASK: (1, "ok")}


def _leaks(root: Path, values: list[str]) -> list[str]:
    """Files under root holding any of `values`: raw bytes, and each Parquet file's decoded rows (compression would
    hide a value from a byte search)."""
    import pyarrow.parquet as pq

    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        blobs = [path.read_bytes()]
        if path.suffix == ".parquet":
            blobs.append(json.dumps(pq.read_table(path).to_pylist(), default=str).encode())
        found += [f"{path.relative_to(root)}: {v[:6]}..." for v in values if any(v.encode() in b for b in blobs)]
    return found


def test_secrets_never_reach_lineage_tables_or_run_metadata(env_secrets, tmp_path, write_tsv):
    import polars as pl

    from amrsim.config import DatasetConfig
    from amrsim.errors import InputError
    from amrsim.stages.ingest import ingest_tables
    from amrsim.stages.train.common import add_to_model_json, train_summary, write_request
    from amrsim.warehouse import Warehouse
    from amrsim.warehouse.lineage import StageRun, record_stage

    wh = Warehouse(tmp_path / "warehouse")
    hf, aws = env_secrets["HF_TOKEN"], env_secrets["AWS_SECRET_ACCESS_KEY"]
    shaped = "hf_" + _random(string.ascii_letters + string.digits, 30)  # token-shaped, not in the environment
    secret_values = [*env_secrets.values(), shaped]
    marker = "marker" + _random(string.ascii_lowercase, 12)  # ordinary data: must be found by the same scan

    # a stage that fails with the secrets in its error (a file whose header holds pasted credentials)
    bad = write_tsv("bad.tsv", ["id", "score", "sentence1", hf, aws, shaped], [["a", "1", "x", "y", "z", "w"]])
    cfg = DatasetConfig(path=str(bad), kind="pairs", columns={"id": "id"})
    with pytest.raises(InputError) as e:
        ingest_tables(wh, "d", cfg, bad, "run-bad")
    assert hf in str(e.value) and aws in str(e.value)  # the error really carried them to the stage
    # an error cut at 2000 characters with a token across the cut
    with pytest.raises(RuntimeError), record_stage(wh, StageRun("run-cut", "p", "s", "d", "c")):
        raise RuntimeError("x" * (2000 - len("RuntimeError: ") - 10) + hf)
    # a stage that succeeds
    good = write_tsv("good.tsv", ["id", "score", "sentence1", "sentence2"], [["a", "4", marker, "B."]])
    assert ingest_tables(wh, "d", DatasetConfig(path=str(good), kind="pairs", columns={"id": "id"}), good,
                         "run-ok").status == "ok"
    # training metadata: a finished run's model.json and request.json, a summary holding an error
    run = wh.models_root / "s3bert" / "r1"
    run.mkdir(parents=True)
    (run / "model.json").write_text(json.dumps({"method": "s3bert", "run_id": "r1"}), encoding="utf-8")
    add_to_model_json(run, {"pipeline": "p", "note": f"pushed with {hf}"})
    summary = train_summary("s3bert", "r1", 4, 4, 0, 0.0, True, error=f"upload failed: {aws}")
    write_request(wh, "s3bert", "r1", "key", summary)

    lineage = wh.read("meta", "lineage")
    errors = dict(zip(lineage["run_id"].to_list(), lineage["error"].to_list(), strict=True))
    assert "***" in errors["run-bad"] and "header lacks column(s)" in errors["run-bad"]  # masked, not dropped
    assert errors["run-cut"].endswith("x***") and hf[:10] not in errors["run-cut"]  # masked before the cut
    assert errors["run-ok"] is None and lineage.filter(pl.col("run_id") == "run-ok")["status"].to_list()[0] == "ok"
    assert json.loads((run / "model.json").read_text())["note"] == "pushed with ***"

    assert _leaks(tmp_path / "warehouse", [marker]), "the scan must see table contents"
    assert _leaks(tmp_path / "warehouse", secret_values) == []


def test_log_redaction_masks_messages_and_tracebacks(env_secrets):
    from amrsim.secrets import RedactingFilter, install_log_redaction, remove_log_redaction

    hf = env_secrets["HF_TOKEN"]
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("amrsim.test_security")
    log.addHandler(handler)
    log.propagate = False
    before = logging.getLogRecordFactory()  # an earlier test in this process (main() in-process) may have installed it
    remove_log_redaction()
    try:
        log.warning("unredacted %s", hf)
        assert hf in stream.getvalue()  # control: without redaction the token is written
        stream.truncate(0)
        handler.addFilter(RedactingFilter())
        log.warning("via filter %s", hf)
        handler.filters.clear()
        install_log_redaction()
        install_log_redaction()  # idempotent: wrapped once
        assert not getattr(logging.getLogRecordFactory().amrsim_wrapped, "amrsim_redacting", False)
        log.warning("via factory %s", env_secrets["AWS_SECRET_ACCESS_KEY"])
        try:
            raise RuntimeError(f"hub said no to {hf}")
        except RuntimeError:
            log.exception("failed")
        out = stream.getvalue()
        assert "via filter ***" in out and "via factory ***" in out and "RuntimeError: hub said no to ***" in out
        assert all(v not in out for v in env_secrets.values())
    finally:
        logging.setLogRecordFactory(before)
        log.removeHandler(handler)
        log.propagate = True


def test_config_does_not_read_or_record_env_secrets(env_secrets, write_config, tmp_path):
    from amrsim.config import load_config

    (tmp_path / "data.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t1\n", encoding="utf-8")
    cfg = load_config(write_config(CONFIG.format(name="d")))
    dumped = json.dumps(cfg.project.model_dump(mode="json"))
    assert all(v not in dumped for v in env_secrets.values())
    assert os.environ["HF_TOKEN"] == env_secrets["HF_TOKEN"]  # still only in the environment


def test_row_error_messages_are_masked_when_stored(env_secrets, wh):
    import polars as pl

    token = env_secrets["HF_TOKEN"]
    rows = pl.DataFrame({"key": ["a", "b"], "lang": ["en", "en"], "text": ["x", None],
                         "status": ["ok", "failed"], "error": [None, f"401 for https://hub/?token={token}"]})
    wh.upsert("d", "sentences", rows)
    stored = wh.read("d", "sentences").sort("key")
    assert stored["error"].to_list() == [None, "401 for https://hub/?token=***"]


# ---------------------------------------------------------------- (f) secrets given to `--set` never reach Prefect

def test_seal_replaces_only_secrets_and_unseal_gives_them_back_in_this_process_only():
    from amrsim.secrets import SEALED, holds_secret, seal, unseal

    password = _random(string.ascii_letters + string.digits, 14)
    overrides = {"datasets.d.path": f"/data/https:/bob:{password}@host/x.tsv", "encode.batch_size": 32,
                 "ray.address": f"ray://alice:{password}@head:10001", "evaluate": {"sts": {"datasets": ["d"]}},
                 "x": {"api_token": "short", "list": ["plain", f"s3://k:{password}@bucket/p"]}, "none": None}
    sealed = seal(overrides)
    assert password not in json.dumps(sealed) and not holds_secret(sealed)
    assert sealed["encode.batch_size"] == 32 and sealed["evaluate"] == overrides["evaluate"]  # the rest as given
    assert sealed["x"]["list"][0] == "plain" and sealed["none"] is None
    for value in (sealed["datasets.d.path"], sealed["ray.address"], sealed["x"]["api_token"], sealed["x"]["list"][1]):
        assert value.startswith(SEALED) and len(value) == len(SEALED) + 16
    assert unseal(sealed) == overrides and unseal(None) is None
    with pytest.raises(ConfigError, match=r"overrides key 'datasets.d.path': holds a secret .* stored by the Prefect"):
        unseal(overrides)  # a deployment run or a direct call given a password in the clear
    with pytest.raises(ConfigError, match="stands for a secret given to another process"):
        unseal({"ray.address": SEALED + "0123456789abcdef"})  # e.g. a flow run started again from the UI


@pytest.mark.slow
def test_deployment_parameter_schema_refuses_secrets_and_accepts_the_rest():
    """What the server checks before it creates a deployment's run (enforce_parameter_schema: true)."""
    from prefect.utilities.callables import parameter_schema
    from prefect.utilities.schema_tools.validation import ValidationError, validate

    from flows.demo import demo
    from flows.evaluate import evaluate
    from flows.refresh_dataset import refresh_dataset
    from flows.train import train

    for flow in (demo, evaluate, refresh_dataset, train):
        schema = parameter_schema(flow.fn).model_dump()
        for ok in ({"overrides": None}, {"overrides": {"encode.batch_size": 32, "datasets": {"d": {"path": "x.tsv"}},
                                                       "metrics.aspects": ["smatch"], "ray.enabled": True}},
                   {"overrides": {"ray.address": "amrsim-secret:0123456789abcdef"}}):
            validate(ok, schema, raise_on_error=True, ignore_required=True)
        for bad in ({"ray.address": "ray://bob:pw12345678@head:10001"}, {"x": {"y": ["hf_" + "a" * 30]}},
                    {"datasets.d.aws_secret_access_key": "x"}):
            with pytest.raises(ValidationError, match="Validation failed for field"):
                validate({"overrides": bad}, schema, raise_on_error=True, ignore_required=True)
    with pytest.raises(ValidationError, match="params"):
        validate({"params": {"anchor": "https://bob:pw12345678@host/m"}}, parameter_schema(train.fn).model_dump(),
                 raise_on_error=True, ignore_required=True)


@pytest.mark.slow
def test_a_set_value_holding_a_url_password_never_reaches_prefect_and_still_takes_effect(tmp_path, monkeypatch):
    """`amrsim run --set datasets.<d>.path=<a path holding https:/user:password@>` against a Prefect server the
    test keeps: the flow and subflow runs' parameters, task runs, logs, artifacts and the server's database file hold
    no trace of the password, and the run read the file the override names."""
    import subprocess
    import sys

    import httpx

    from amrsim.synthetic import pipeline_yaml, write_pairs
    from flows.runtime import TemporaryServer
    from tests.helpers import cli_env

    password = "pw" + _random(string.ascii_letters + string.digits, 14)
    write_pairs(tmp_path / "pairs.tsv", 0, 30)
    secret_dir = tmp_path / "https:" / f"bob:{password}@host"
    secret_dir.mkdir(parents=True)
    write_pairs(secret_dir / "pairs.tsv", 0, 12)  # another row count: shows which file the run read
    (tmp_path / "pipelines.yaml").write_text(pipeline_yaml(tmp_path / "pairs.tsv"), encoding="utf-8")

    home = tmp_path / "server-home"
    home.mkdir()
    for key, value in {"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                       "PREFECT_API_URL": ""}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("PREFECT_API_URL")
    with (tmp_path / "server.log").open("wb") as log:
        server = TemporaryServer(log, 120)
        server.start()  # sets PREFECT_API_URL here; monkeypatch restores it
        try:
            server.wait_ready()
            env = {**cli_env(tmp_path), "PREFECT_API_URL": server.api_url}  # the run uses it and starts none
            proc = subprocess.run([sys.executable, "-m", "amrsim.cli", "run", "--set",
                                   f"datasets.synthetic.path={secret_dir / 'pairs.tsv'}"],
                                  cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            with httpx.Client(base_url=server.api_url, timeout=30) as api:
                flow_runs = api.post("/flow_runs/filter", json={}).json()
                task_runs = api.post("/task_runs/filter", json={}).json()
                logs = api.post("/logs/filter", json={"limit": 200}).json()
                artifacts = api.post("/artifacts/filter", json={}).json()
                variables = api.post("/variables/filter", json={}).json()
        finally:
            server.stop()
    assert {r["flow_id"] for r in flow_runs} and len(flow_runs) >= 3  # demo and its subflows
    assert task_runs and logs is not None
    demo_run = next(r for r in flow_runs if "pipeline" in r["parameters"] and not r.get("parent_task_run_id"))
    sealed = demo_run["parameters"]["overrides"]["datasets.synthetic.path"]
    assert sealed.startswith("amrsim-secret:")  # a placeholder: the value went outside Prefect
    for name, found in {"flow runs": flow_runs, "task runs": task_runs, "logs": logs, "artifacts": artifacts,
                        "variables": variables}.items():
        assert password not in json.dumps(found), f"{name} hold the password"
    for path in home.rglob("*"):  # the database (and its WAL): events, states, parameters, anything else
        if path.is_file():
            assert password.encode() not in path.read_bytes(), path
    assert password not in proc.stdout + proc.stderr
    assert password not in (tmp_path / "run" / "logs" / "prefect.log").read_text(encoding="utf-8")
    from amrsim.warehouse import Warehouse

    assert Warehouse(tmp_path / "wh").read("synthetic", "pairs").height == 12  # the override's file, not the 30
