"""Helpers shared across test modules (fixtures stay in conftest.py)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import threading
import warnings
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from amrsim.metrics import metric_columns

ROOT = Path(__file__).resolve().parent.parent
TEST_DATA = ROOT / "tests" / "data"  # golden files and schemas the tests compare against
SHARED_DATA = ROOT.parent / "shared" / "data"


def shared(*parts: str) -> Path:
    """A path under ../shared/data, skipping the test with a message where it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/data ships with the project's machines, not with a clone)")
    return path


def cli_env(tmp_path: Path, own_server: bool = False) -> dict[str, str]:
    """Environment for an `amrsim` subprocess: Prefect state under tmp_path/run, offline hub, this checkout. Flows
    report to this test process's one loopback Prefect server (`shared_prefect_server`), as they would to a user's
    configured server; `own_server`: the command starts its own temporary server, as it does for a user with none
    configured (tests of that server's start, stop and death, and of the demo a user first runs)."""
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "run" / "prefect"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(ROOT), "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}
    if own_server:
        env.pop("PREFECT_API_URL", None)
    else:
        env["PREFECT_API_URL"] = shared_prefect_server()
    return env


_SHARED_SERVER: list = []
_SHARED_SERVER_LOCK = threading.Lock()


def shared_prefect_server() -> str:
    """The API URL of one Prefect server for this test process, started at first use (amrsim's own temporary server,
    its state in a temporary directory), ended with the process. Starting one per flow run cost each run ~10 s of CPU
    (Prefect's server imports and database migrations) on a 2-core machine."""
    with _SHARED_SERVER_LOCK:
        if not _SHARED_SERVER:
            _SHARED_SERVER.append(_start_shared_server())
    return _SHARED_SERVER[0].api_url


def _start_shared_server():
    import atexit
    import tempfile

    from flows.runtime import TemporaryServer

    home = Path(tempfile.mkdtemp(prefix="amrsim-test-prefect-"))
    started: list = []
    ready = threading.Event()

    def keeper() -> None:
        # the server's parent-death signal follows the thread that started it: this one lives as long as the process
        try:
            saved = dict(os.environ)
            try:  # the server's environment; this process's own is left as it was
                os.environ["PREFECT_HOME"] = str(home)
                server = TemporaryServer((home / "server.log").open("ab"), startup_timeout=120)
                server.start()
            finally:
                os.environ.clear()
                os.environ.update(saved)
            server.wait_ready()
            started.append(server)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            started.append(e)
        ready.set()
        threading.Event().wait()

    threading.Thread(target=keeper, daemon=True, name="amrsim-test-prefect-server").start()
    ready.wait()
    if isinstance(started[0], BaseException):
        raise started[0]
    atexit.register(shutil.rmtree, home, ignore_errors=True)  # runs after the server's stop (atexit is LIFO)
    atexit.register(started[0].stop)
    return started[0]


# words of the tiny translation models' corpora: English, and German for the X -> English models
EN_WORDS = ("the cat dog bird house tree river stone green small big runs sees eats walks quickly slowly near under "
            "over with and but a an old young red blue sings reads writes book letter garden window door city").split()
DE_WORDS = ("der die das Katze Hund Vogel Haus Baum Fluss Stein grün klein groß läuft sieht isst geht schnell "
            "langsam nahe unter über mit und aber ein eine alt jung rot blau singt liest schreibt Buch Brief Garten "
            "Fenster Tür Stadt").split()


def random_sentence(rng: random.Random, words: Sequence[str] = EN_WORDS) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(3, 12))).capitalize() + rng.choice(".!?")


def build_tiny_marian(root: Path, words: Sequence[str] = EN_WORDS, max_pos: int = 64, seed: int = 0) -> str:
    """A 1+1-layer, d_model 16 Marian model with random weights and a SentencePiece tokenizer trained on sentences of
    `words` (plus English ones, so its output decodes to English pieces), saved under `root/model`; returns that
    directory. Random weights translate into garbage: enough to check mechanics (order, batching, keys, failures)."""
    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    corpus = root / "corpus.txt"
    lines = [random_sentence(rng, words) for _ in range(400)]
    if words is not EN_WORDS:
        lines += [random_sentence(rng) for _ in range(400)]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(root / "sp"), vocab_size=200,
                                   model_type="unigram", character_coverage=1.0, hard_vocab_limit=False,
                                   unk_id=0, bos_id=-1, eos_id=1, pad_id=-1, minloglevel=2)
    proc = spm.SentencePieceProcessor(model_file=str(root / "sp.model"))
    # Marian's vocab.json maps pieces to model ids: </s> 0, <unk> 1, the pieces, then <pad> last.
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(proc.get_piece_size()):
        vocab.setdefault(proc.id_to_piece(i), len(vocab))
    vocab["<pad>"] = len(vocab)
    (root / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Recommended: pip install sacremoses."
        tok = MarianTokenizer(str(root / "sp.model"), str(root / "sp.model"), str(root / "vocab.json"),
                              model_max_length=max_pos)
    out = root / "model"
    tok.save_pretrained(out)
    torch.manual_seed(seed)
    config = MarianConfig(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                          decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, vocab_size=len(vocab),
                          max_position_embeddings=max_pos, pad_token_id=vocab["<pad>"], eos_token_id=0,
                          forced_eos_token_id=0, decoder_start_token_id=vocab["<pad>"], scale_embedding=True,
                          init_std=1.0)  # large weights: outputs then depend on the input
    MarianMTModel(config).save_pretrained(out)
    return str(out)


def build_tiny_bert(root: Path, words: Sequence[str], seed: int = 0) -> str:
    """A randomly initialised 2-layer BERT (hidden 32) with a word-level WordPiece vocab of `words`, saved as a
    transformers directory under `root`; returns its path."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *dict.fromkeys(words)]
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab=str(root / "vocab.txt"))
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(root)
    tokenizer.save_pretrained(root)
    return str(root)


def run_cli(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`amrsim ARGS` as a real process in `cwd` (exit code, stdout and stderr as a user sees them); wide output so
    table cells are not wrapped."""
    from tests.forked import amrsim_cli

    return amrsim_cli(*args, cwd=cwd, env={**cli_env(cwd), "COLUMNS": "200"}, timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The single `error: ...` line of a command that failed with exit 2 (asserts there is no traceback)."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0]


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
    from tests.forked import fresh_python

    out = tmp / f"outside-{kind}.npy"
    done = fresh_python(LOAD_SCRIPT, kind, str(path), json.dumps(inputs), str(out), cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    return np.load(out), json.loads(done.stdout.strip().splitlines()[-1])


def tiny_bert(root: Path, words: Sequence[str], seed: int = 0, hidden: int = 32, layers: int = 2) -> Path:
    """A randomly initialised BERT (hidden `hidden`, `layers` layers) with a word-level vocab of `words` after the
    five special tokens, saved as a plain transformers directory (no modules.json) at `root`; returns `root`."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root.mkdir(parents=True, exist_ok=True)
    (root / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n",
                                    encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab=str(root / "vocab.txt"))
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=5 + len(words), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=64)
    BertModel(config).save_pretrained(root)
    tokenizer.save_pretrained(root)
    return root


# ---------------------------------------------------------------- toy sentences, a tiny S3BERT base model

ANIMALS = ["cat", "dog", "bird", "fish"]
COLOURS = ["red", "blue", "green", "black"]
VERBS = ["runs", "sleeps", "eats", "jumps"]
HIDDEN = 64  # the tiny sentence-transformers model's width


def build_tiny_sentence_transformer(root: Path) -> str:
    """A randomly initialised 3-layer BERT (hidden 64) with a word-level vocab of ANIMALS, COLOURS and VERBS, saved
    as a sentence-transformers dir under `root`; returns that directory."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    hf = root / "hf"
    hf.mkdir()
    (hf / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", *ANIMALS,
                                             *COLOURS, *VERBS]) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast(vocab=str(hf / "vocab.txt"))  # transformers 5: `vocab`, not `vocab_file`
    assert tokenizer("the cat")["input_ids"] == [2, 5, 6, 3]  # words known, not [UNK]
    torch.manual_seed(0)
    config = BertConfig(vocab_size=5 + 1 + 12, hidden_size=HIDDEN, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=16)
    BertModel(config).save_pretrained(hf)
    tokenizer.save_pretrained(hf)
    model = SentenceTransformer(modules=[Transformer(str(hf), max_seq_length=16), Pooling(HIDDEN, "mean")],
                                device="cpu")
    model.save(str(root / "st"), create_model_card=False)
    return str(root / "st")


def toy_pairs(seed: int, n: int, animals: Sequence[str] = ANIMALS, colours: Sequence[str] = COLOURS,
              verbs: Sequence[str] = VERBS) -> tuple[list[str], list[str], np.ndarray]:
    """'the <colour> <animal> <verb>' pairs; aspect targets 1/0: same animal, same colour, same verb."""
    rng = np.random.default_rng(seed)
    t1, t2, y = [], [], []
    for _ in range(n):
        a = rng.integers(4, size=3)
        same = rng.random(3) < 0.5
        b = np.where(same, a, (a + rng.integers(1, 4, size=3)) % 4)
        t1.append(f"the {colours[a[1]]} {animals[a[0]]} {verbs[a[2]]}")
        t2.append(f"the {colours[b[1]]} {animals[b[0]]} {verbs[b[2]]}")
        y.append(same.astype(np.float32))
    return t1, t2, np.array(y)


class CountingEncoder:
    """Bag-of-characters vectors: deterministic, and similar texts get similar vectors."""

    name, model_id, dim = "minilm", "fake", 26

    def __init__(self, fail_on: str | None = None):
        self.seen: list[str] = []
        self.fail_on = fail_on

    def encode(self, texts: list[str]) -> np.ndarray:
        if self.fail_on and any(self.fail_on in t for t in texts):
            raise RuntimeError("model exploded")
        self.seen += texts
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out + 1e-3


# the amr_metrics columns two runs must agree on: all but `seconds`, which is wall time
COMPARED = ["key", "pair_key", "item_id", "split", "sentence1_key", "sentence2_key", "score", *metric_columns(),
            "options", "status", "error"]


def multilingual_sentences(n: int = 10_000, seed: int = 0) -> list[str]:
    """`n` sentences in every language of ../shared/data (XNLI's 15, Tatoeba's 112, STSb's 10), shuffled, ending
    with the hard cases: empty, blank, a zero-width space, emoji, mixed scripts with unknown characters, NFKC
    ligatures, a 3,000-token sentence."""
    import gzip

    hard = ["", " ", "\t\n", "\u200b", "a😀😀b", "Mixed 日本語 and Русский текст ١٢٣", "ﬁ①ＡＢＣ", "。", "x " * 3000,
            "Der Hund " * 800]
    texts: list[str] = []
    for f in sorted(shared("xnli").glob("xnli_test_*.tsv.gz")):
        texts += [line.split("\t")[0] for line in gzip.open(f, "rt", encoding="utf-8").read().splitlines()[1:400]]
    for f in sorted(shared("tatoeba").glob("tatoeba.*.tsv")):
        texts += [line.split("\t")[0] for line in f.read_text(encoding="utf-8").splitlines()[1:60]]
    for f in sorted(shared("stsb_multi_mt").glob("stsb_*_test.tsv")):
        texts += [line.split("\t")[0] for line in f.read_text(encoding="utf-8").splitlines()[1:100]]
    random.Random(seed).shuffle(texts)
    return texts[: n - len(hard)] + hard
