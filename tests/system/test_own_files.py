"""amrsim writes only its own files: a symlink, FIFO, device, directory or hard link planted where it writes under
the warehouse or the run directory (a lock file, model.json, a run's files and checkpoint, the embeddings table's
log, Prefect's log, a PEAR study journal, a report's figures) is refused with one line naming it, and the file it
leads to is left as it was."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from unittest import mock

import numpy as np
import polars as pl
import pytest

from amrsim.errors import UnsafeFile
from amrsim.files import atomic_json
from amrsim.warehouse.lock import lock_path, run_lock, run_lock_path, table_lock
from tests.helpers import one_line_error, run_cli, toy_pairs

VICTIM = "precious: not amrsim's\n"


@pytest.fixture
def victim(tmp_path) -> Path:
    """A file outside the warehouse that a planted link leads to (mode 0600, so a chmod through a link shows)."""
    path = tmp_path / "outside" / "victim.txt"
    path.parent.mkdir()
    path.write_text(VICTIM, encoding="utf-8")
    path.chmod(0o600)
    return path


def _untouched(victim: Path) -> None:
    assert victim.read_text(encoding="utf-8") == VICTIM
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert sorted(p.name for p in victim.parent.iterdir()) == [victim.name]


# ---------------------------------------------------------------- lock files (tables and training runs)


def _plant(kind: str, path: Path, victim: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "symlink":
        path.symlink_to(victim)
    elif kind == "hard link":
        os.link(victim, path)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


@pytest.mark.parametrize("kind", ["symlink", "hard link", "fifo", "directory"])
def test_a_table_lock_that_is_not_a_file_amrsim_made_is_refused_and_left_alone(wh, victim, kind):
    path = lock_path(wh.root, "d", "pairs")
    _plant(kind, path, victim)
    before = os.lstat(path)
    with pytest.raises(UnsafeFile) as refused:
        with table_lock(wh.root, "d", "pairs"):
            pytest.fail("the lock was taken")
    message = str(refused.value)
    assert "\n" not in message and str(path) in message and "remove it" in message
    _untouched(victim)
    after = os.lstat(path)
    assert (after.st_mode, after.st_ino, after.st_nlink) == (before.st_mode, before.st_ino, before.st_nlink)


def test_a_training_lock_that_is_a_symlink_is_refused_and_its_target_left_alone(wh, victim):
    path = run_lock_path(wh.models_root, "s3bert", "r1")
    _plant("symlink", path, victim)
    with pytest.raises(UnsafeFile, match="symbolic link"):
        with run_lock(wh.models_root, "s3bert", "r1"):
            pytest.fail("the lock was taken")
    _untouched(victim)


def test_a_symlinked_lock_directory_is_refused(wh, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    wh.root.mkdir(parents=True)
    (wh.root / ".locks").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafeFile, match=r"\.locks"):
        with table_lock(wh.root, "d", "pairs"):
            pytest.fail("the lock was taken")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a file to another user needs root")
def test_a_lock_file_of_another_user_is_refused_never_truncated(wh):
    path = lock_path(wh.root, "d", "pairs")
    path.parent.mkdir(parents=True)
    path.write_text("theirs", encoding="utf-8")
    os.chown(path, 65534, 65534)
    with pytest.raises(UnsafeFile, match="owned by"):
        with table_lock(wh.root, "d", "pairs"):
            pytest.fail("the lock was taken")
    assert path.read_text(encoding="utf-8") == "theirs"


def test_an_ordinary_lock_file_is_taken_again(wh):
    with table_lock(wh.root, "d", "pairs"):
        pass
    with table_lock(wh.root, "d", "pairs"):  # the file of the first lock, amrsim's own
        info = json.loads(lock_path(wh.root, "d", "pairs").read_text(encoding="utf-8"))
    assert info["pid"] == os.getpid()


@pytest.mark.slow
def test_the_cli_refuses_a_symlinked_lock_in_one_line_and_leaves_the_target_alone(tmp_path, victim, tiny_model):
    (tmp_path / "sts.tsv").write_text("sentence1\tsentence2\tscore\nthe red cat\tthe blue dog\t1\n"
                                      "the cat runs\tthe dog runs\t3\n", encoding="utf-8")
    locks = tmp_path / "warehouse" / ".locks"
    locks.mkdir(parents=True)
    for name in ("sts.sentences", "sts.pairs", "sts.embeddings", "eval.results", "meta.lineage"):
        (locks / f"{name}.lock").symlink_to(victim)
    line = one_line_error(run_cli(tmp_path, "evaluate", "sts", "--file", "sts.tsv", "--encoder", f"hf:{tiny_model}"))
    assert str(locks) in line and ".lock: refused" in line and "symbolic link" in line
    _untouched(victim)


# ---------------------------------------------------------------- files amrsim writes whole (model.json, ...)


@pytest.mark.parametrize("planted", ["model.json", "model.safetensors"])
def test_finishing_a_run_never_writes_or_chmods_through_a_link(tmp_path, victim, planted):
    """model.json is written whole, and the run's weights get the mode the umask gives (`ordinary_modes`):
    through a link, either reached the file it leads to (the JSON replaced the link; chmod changed the file)."""
    from amrsim.methods.training import write_model_json

    run = tmp_path / "wh" / "models" / "s3bert" / "r1"
    run.mkdir(parents=True)
    (run / planted).symlink_to(victim)
    with pytest.raises(UnsafeFile, match=rf"{planted}: refused to write: it is a symbolic link"):
        write_model_json(run, "s3bert", {"encoder": "."})
    _untouched(victim)  # its text, and its mode 0600
    assert (run / "model.json").is_symlink() == (planted == "model.json")  # no model.json written in its place


def test_a_link_at_the_temporary_file_of_a_whole_write_is_never_written_through(tmp_path, victim):
    """The temporary file beside the target had a predictable name (`.<name>.tmp-<pid>`): a link planted there
    took the JSON. Now the temporary file is made new (O_EXCL), under a name nobody can guess."""
    target = tmp_path / "wh" / "request.json"
    target.parent.mkdir(parents=True)
    (target.parent / f".{target.name}.tmp-{os.getpid()}").symlink_to(victim)
    atomic_json(target, {"key": "k"})
    _untouched(victim)
    assert json.loads(target.read_text(encoding="utf-8")) == {"key": "k"}
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()  # as open() would make it, not mkstemp's 0600


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------- a run directory and its checkpoint


@pytest.mark.parametrize("planted", ["tokenizer_config.json", "model.json", "checkpoint",
                                     "checkpoint.tmp", "checkpoint/train_state.pt", "hard link config.json"])
def test_training_into_a_run_directory_holding_a_planted_link_is_refused_before_anything(tiny_model, tmp_path,
                                                                                         victim, planted,
                                                                                         one_thread):
    from amrsim.methods.s3bert import train_s3bert

    out = tmp_path / "wh" / "models" / "s3bert" / "r1"
    name = planted.removeprefix("hard link ")
    (out / name).parent.mkdir(parents=True, exist_ok=True)
    if planted.startswith("hard link"):
        os.link(victim, out / name)
    elif name in ("checkpoint", "checkpoint.tmp"):
        (out / name).symlink_to(victim.parent, target_is_directory=True)
    else:
        (out / name).symlink_to(victim)
    with pytest.raises(UnsafeFile) as refused:
        train_s3bert(tiny_model, *toy_pairs(3, 12), None, out, batch_size=4, epochs=1, max_steps=1, n_aspects=3,
                     aspect_dim=16, device="cpu")
    assert str(out / name) in str(refused.value) and "\n" not in str(refused.value)
    assert victim.read_text(encoding="utf-8") == VICTIM and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert sorted(p.name for p in victim.parent.iterdir()) == [victim.name]
    assert not (out / "model.safetensors").exists()


# ---------------------------------------------------------------- the embeddings cache (a Delta table)


class _Zeros:
    """An encoder that is not loaded: zero vectors."""

    name, model_id, dim = "stub", "stub", 4

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.zeros((len(texts), self.dim), dtype=np.float32)


def test_an_embeddings_table_whose_log_is_linked_out_of_the_warehouse_is_refused(wh, tmp_path, tiny_model):
    from amrsim.encoders.cache import embed_sentences

    name = f"hf:{tiny_model}"
    embed_sentences(wh, "d", name, pl.DataFrame({"key": ["a"], "text": ["the cat"]}), encoder=_Zeros())
    log = wh.table_path("d", "embeddings") / "_delta_log"
    elsewhere = tmp_path / "elsewhere_log"
    shutil.move(log, elsewhere)
    log.symlink_to(elsewhere, target_is_directory=True)
    before = sorted(p.name for p in elsewhere.iterdir())
    with pytest.raises(UnsafeFile, match=r"_delta_log: refused.*symbolic link"):
        embed_sentences(wh, "d", name, pl.DataFrame({"key": ["b"], "text": ["the dog"]}), encoder=_Zeros())
    assert sorted(p.name for p in elsewhere.iterdir()) == before


# ---------------------------------------------------------------- the run directory's logs, studies, reports


@pytest.mark.slow
def test_prefects_log_that_is_a_symlink_is_refused_before_the_flow_starts(tmp_path, victim):
    from amrsim.cli.flow import flow_runtime

    log = tmp_path / "run" / "logs" / "prefect.log"
    log.parent.mkdir(parents=True)
    log.symlink_to(victim)
    with mock.patch.dict(os.environ, {"PREFECT_API_URL": "http://127.0.0.1:9/api"}):  # no server is started
        with pytest.raises(UnsafeFile, match=r"prefect\.log: refused"):
            with flow_runtime(tmp_path / "run", "amrsim run p", verbose=False):
                pytest.fail("the flow ran")
    _untouched(victim)


def test_a_pear_study_journal_that_is_a_symlink_is_refused(wh, victim):
    from amrsim.stages.train.pear import open_study, study_path

    path = study_path(wh, "s")
    path.parent.mkdir(parents=True)
    path.symlink_to(victim)
    with pytest.raises(UnsafeFile, match=r"s\.journal: refused"):
        open_study(wh, "s")
    _untouched(victim)


def test_a_report_whose_figures_folder_is_linked_out_is_refused(tmp_path):
    from amrsim.stages.evaluate.report import _commit

    out, staging, elsewhere = tmp_path / "reports", tmp_path / ".reports.tmp", tmp_path / "pictures"
    for folder in (out, staging / "figures", elsewhere):
        folder.mkdir(parents=True)
    (elsewhere / "holiday.png").write_bytes(b"png")
    (out / "figures").symlink_to(elsewhere, target_is_directory=True)
    (staging / "figures" / "new.png").write_bytes(b"png")
    for name in ("report.md", "report.html"):
        (staging / name).write_text("report", encoding="utf-8")
    with pytest.raises(UnsafeFile, match=r"figures: refused"):
        _commit(staging, out, {"new.png"})
    assert sorted(p.name for p in elsewhere.iterdir()) == ["holiday.png"]
