"""Helpers shared by several test modules."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

TINY_WORDS = ["the", "cat", "dog", "bird", "fish", "red", "blue", "green", "black", "runs", "eats", "sleeps",
              "sings", "der", "hund", "die", "katze"]


def tiny_sentence_transformer(root: Path, seed: int = 0, hidden: int = 32) -> Path:
    """A randomly initialised 2-layer BERT with a word-level vocab (TINY_WORDS), saved as a sentence-transformers
    directory (mean pooling) under `root`; returns its path."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    hf = root / "hf"
    hf.mkdir(parents=True)
    (hf / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *TINY_WORDS]) + "\n",
                                  encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab=str(hf / "vocab.txt"))
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=5 + len(TINY_WORDS), hidden_size=hidden, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    BertModel(config).save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    model = SentenceTransformer(modules=[Transformer(str(hf), max_seq_length=32), Pooling(hidden, "mean")],
                                device="cpu")
    model.save(str(root / "st"), create_model_card=False)
    shutil.rmtree(hf)
    return root / "st"


def sentence_transformer_run(models_root: Path, method: str, run_id: str, created_at: datetime, encoder: Path,
                             **meta: object) -> Path:
    """A run directory `<models_root>/<method>/<run_id>` whose model.json names `encoder` (copied in as
    `encoder/`, the run directory loading it): the layout a bi-encoder method writes, for tests of what reads
    runs."""
    from amrsim.methods.portable import link_run_root

    run = models_root / method / run_id
    shutil.copytree(encoder, run / "encoder")
    link_run_root(run, "encoder")
    (run / "model.json").write_text(json.dumps({"method": method, "run_id": run_id,
                                                "created_at": created_at.isoformat(), "encoder": "encoder",
                                                **meta}), encoding="utf-8")
    return run


LOAD_SCRIPT = """
import json, sys
import numpy as np
kind, path, inputs, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
if kind == "bi":
    from sentence_transformers import SentenceTransformer
    values = SentenceTransformer(path, device="cpu").encode(inputs, convert_to_numpy=True)
else:
    from sentence_transformers import CrossEncoder
    values = CrossEncoder(path, device="cpu").predict([tuple(p) for p in inputs], convert_to_numpy=True)
np.save(out, np.asarray(values, dtype=np.float64))
print(json.dumps(sorted(m for m in sys.modules if m == "amrsim" or m.startswith("amrsim."))))
"""


def load_outside_amrsim(kind: str, path: Path, inputs: list, tmp: Path) -> tuple[object, list[str]]:
    """Load `path` in a fresh Python process that imports only sentence-transformers (`SentenceTransformer` for
    kind "bi", `CrossEncoder` for "cross") and run it on `inputs` (texts, or [text1, text2] pairs). Returns the
    vectors or scores and the amrsim modules that process ended up importing."""
    import os
    import subprocess
    import sys

    import numpy as np

    out = tmp / f"outside-{kind}.npy"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, kind, str(path), json.dumps(inputs), str(out)],
                          capture_output=True, text=True, env=env, cwd=tmp, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return np.load(out), json.loads(done.stdout.strip().splitlines()[-1])
