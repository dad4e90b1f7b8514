"""Transfer tasks as in SentEval and MSE-AMR (Cai et al. 2022, §6.1): a logistic-regression classifier on frozen
sentence embeddings, trained on English, with L2 strength C chosen on the union of all languages' dev sets, then
zero-shot accuracy x 100 on each language's test set. Pair tasks use SentEval's [u, v, |u-v|, u*v] features.
Reading the task files is `amrsim.ingest.transfer`'s; running a task from its files,
`amrsim.stages.evaluate.transfer`'s."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np

from amrsim.errors import InputError
from amrsim.evaluate import Score

# threadpoolctl, sklearn are imported inside the functions: importing this module must stay cheap

TASK = "transfer"
C_GRID: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # SentEval's 2^-2 .. 2^4 (one power wider)
MAX_ITER = 5000


@dataclass(frozen=True)
class TransferTask:
    """A classification task: `single` classifies one text, `pair` a text pair; `label_names` is the label set
    a file may use (empty: any), so a mislabelled or differently encoded file fails loudly."""

    name: str
    kind: Literal["single", "pair"]
    label_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("single", "pair"):
            raise ValueError(f"task '{self.name}': kind must be 'single' or 'pair', not '{self.kind}'")

    @property
    def n_texts(self) -> int:
        return 2 if self.kind == "pair" else 1


TASKS: dict[str, TransferTask] = {t.name: t for t in (
    TransferTask("sick_e", "pair", ("ENTAILMENT", "NEUTRAL", "CONTRADICTION")),
    TransferTask("xnli", "pair", ("entailment", "neutral", "contradiction")),
    TransferTask("pawsx", "pair", ("0", "1")),
    TransferTask("mldoc", "single", ("CCAT", "ECAT", "GCAT", "MCAT")),
    TransferTask("marc", "single", ("1", "2", "3", "4", "5")),
)}

class BadRow(NamedTuple):
    line: int  # the file line (header = line 1); for CSV, the record number counted the same way
    reason: str


class TransferFile(NamedTuple):
    """What one file holds: row-aligned texts and labels of the good rows, and the rows left out with why."""

    texts1: list[str]
    texts2: list[str] | None
    labels: list[str]
    bad_rows: list[BadRow]

    @property
    def n_bad(self) -> int:
        return len(self.bad_rows)


def check_labels(labels: Iterable[str], known: Iterable[str], where: str | Path, what: str = "training") -> None:
    """InputError naming the first label (and `where` it came from) that `known` lacks: a label unseen in
    training cannot be predicted, and one outside a task's label set means a mislabelled file."""
    known_set = set(known)
    unseen = sorted({str(x) for x in labels} - {str(k) for k in known_set})
    if unseen:
        raise InputError(str(where), f"label '{unseen[0]}' does not occur in {what} (known: {sorted(known_set)})"
                         + (f"; also {unseen[1:]}" if len(unseen) > 1 else ""))


def pair_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """SentEval's pair representation [u, v, |u-v|, u*v], row by row."""
    if u.shape != v.shape or u.ndim != 2:
        raise ValueError(f"pair embeddings must be two equal 2-D arrays, got {u.shape} and {v.shape}")
    return np.hstack([u, v, np.abs(u - v), u * v])


def embed_texts(encode: Callable[[list[str]], np.ndarray], texts: Sequence[str]) -> np.ndarray:
    """Embeddings of `texts`, row-aligned, encoding each distinct text once."""
    unique = list(dict.fromkeys(texts))
    vecs = np.asarray(encode(unique))
    if vecs.ndim != 2 or vecs.shape[0] != len(unique):
        raise ValueError(f"encoder returned shape {vecs.shape} for {len(unique)} texts")
    index = {t: i for i, t in enumerate(unique)}
    return vecs[[index[t] for t in texts]]


def embed_pairs(encode: Callable[[list[str]], np.ndarray], texts1: Sequence[str],
                texts2: Sequence[str]) -> np.ndarray:
    """Pair features of row-aligned texts, encoding every distinct text of both sides once (SICK repeats
    sentences across pairs)."""
    if len(texts1) != len(texts2):
        raise ValueError(f"texts1 has {len(texts1)} rows, texts2 {len(texts2)}")
    both = embed_texts(encode, [*texts1, *texts2])
    return pair_features(both[: len(texts1)], both[len(texts1):])


def task_features(task: TransferTask, encode: Callable[[list[str]], np.ndarray], data: TransferFile) -> np.ndarray:
    """Features of a loaded file for its task kind: the embedding, or the pair features."""
    if task.kind == "pair":
        if data.texts2 is None:
            raise ValueError(f"task '{task.name}' needs text pairs")
        return embed_pairs(encode, data.texts1, data.texts2)
    return embed_texts(encode, data.texts1)


Split = tuple[np.ndarray, Sequence[str] | np.ndarray]


@dataclass
class TransferResult:
    """Accuracies x 100: the dev union at every C tried, per-language dev and test at the chosen C."""

    task: str
    c: float
    classes: list[str]
    n_train: int
    dev_accuracy: float
    dev_n: int
    dev_by_c: dict[float, float]
    dev_by_lang: dict[str, float]
    test_accuracy: dict[str, float]
    test_n: dict[str, int]
    converged: dict[float, bool] = field(default_factory=dict)


def _as_split(split: Split, what: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = split
    x = np.asarray(x)
    y = np.asarray([str(v) for v in y], dtype=object)
    if x.ndim != 2 or x.shape[0] != len(y):
        raise ValueError(f"{what}: X must be 2-D with one row per label, got X {x.shape} and {len(y)} labels")
    if len(y) == 0:
        raise ValueError(f"{what}: no examples")
    return x, y


def _accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(pred == y) * 100)


def evaluate_transfer(task_name: str, train: Split, devs: Mapping[str, Split], tests: Mapping[str, Split],
                      seed: int = 0, c_grid: Sequence[float] = C_GRID, blas_threads: int | None = 1) -> TransferResult:
    """Fit a standardiser on train, then an L2 logistic regression (lbfgs; multinomial for 3+ classes) per C;
    keep the C with the best accuracy on all dev sets together (ties: the smaller C, the stronger penalty) and
    score every test language with that model. Nothing is fitted on dev or test data. BLAS runs on
    `blas_threads` (None: the library default): lbfgs makes many small matrix products, and on a busy 2-core host
    two OpenBLAS threads made a SICK-sized fit 15x slower than one."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=blas_threads):
        return _evaluate(task_name, train, devs, tests, seed, c_grid)


def _evaluate(task_name: str, train: Split, devs: Mapping[str, Split], tests: Mapping[str, Split], seed: int,
              c_grid: Sequence[float]) -> TransferResult:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    if not devs:
        raise ValueError(f"task '{task_name}': C is chosen on dev sets, none given")
    if not c_grid or any(c <= 0 for c in c_grid):
        raise ValueError(f"c_grid must be non-empty and positive, got {list(c_grid)}")
    x_train, y_train = _as_split(train, f"{task_name} train")
    classes = sorted(set(y_train))
    if len(classes) < 2:
        raise InputError(f"{task_name} train", f"training labels have a single class '{classes[0]}': a classifier "
                                               f"needs at least two")
    dev = {lang: _as_split(s, f"{task_name} dev '{lang}'") for lang, s in devs.items()}
    test = {lang: _as_split(s, f"{task_name} test '{lang}'") for lang, s in tests.items()}
    for split, parts in (("dev", dev), ("test", test)):
        for lang, (x, y) in parts.items():
            check_labels(y, classes, f"{task_name} {split} '{lang}'")
            if x.shape[1] != x_train.shape[1]:
                raise ValueError(f"{task_name} {split} '{lang}': {x.shape[1]} features, train has {x_train.shape[1]}")

    scaler = StandardScaler().fit(x_train)
    z_train = scaler.transform(x_train)
    z_dev = {lang: scaler.transform(x) for lang, (x, _) in dev.items()}
    x_union = np.vstack(list(z_dev.values()))
    y_union = np.concatenate([y for _, y in dev.values()])

    model: LogisticRegression | None = None
    dev_acc, chosen = -1.0, 0.0
    dev_by_c: dict[float, float] = {}
    converged: dict[float, bool] = {}
    for c in sorted(float(c) for c in c_grid):
        fitted = LogisticRegression(C=c, l1_ratio=0.0, solver="lbfgs", max_iter=MAX_ITER, random_state=seed)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            fitted.fit(z_train, y_train)
        converged[c] = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
        dev_by_c[c] = _accuracy(fitted.predict(x_union), y_union)
        if dev_by_c[c] > dev_acc:  # ascending C: a tie keeps the smaller C
            model, dev_acc, chosen = fitted, dev_by_c[c], c
    assert model is not None
    return TransferResult(
        task=task_name, c=chosen, classes=classes, n_train=len(y_train), dev_accuracy=dev_acc, dev_n=len(y_union),
        dev_by_c=dev_by_c,
        dev_by_lang={lang: _accuracy(model.predict(z_dev[lang]), y) for lang, (_, y) in dev.items()},
        test_accuracy={lang: _accuracy(model.predict(scaler.transform(x)), y) for lang, (x, y) in test.items()},
        test_n={lang: len(y) for lang, (_, y) in test.items()}, converged=converged)


def transfer_scores(model: str, dataset: str, result: TransferResult) -> list[Score]:
    """Scores of one task: test accuracy per language (split test, lang_pair = language), the dev-union accuracy
    and the chosen C (split dev, lang_pair 'all')."""
    scores = [Score(TASK, model, dataset, "test", lang, "accuracy", acc, result.test_n[lang])
              for lang, acc in result.test_accuracy.items()]
    scores.append(Score(TASK, model, dataset, "dev", "all", "dev_accuracy", result.dev_accuracy, result.dev_n))
    scores.append(Score(TASK, model, dataset, "dev", "all", "C", result.c, result.dev_n))
    return scores
