"""Transfer tasks as in SentEval and MSE-AMR (Cai et al. 2022, §6.1): a logistic-regression classifier on frozen
sentence embeddings, trained on English, with L2 strength C chosen on the union of all languages' dev sets, then
zero-shot accuracy x 100 on each language's test set. Pair tasks use SentEval's [u, v, |u-v|, u*v] features."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
import polars as pl

from amrsim.errors import InputError
from amrsim.evaluate import Score
from amrsim.files import file_format

# threadpoolctl, sklearn are imported inside the functions: importing this module must stay cheap

TASK = "transfer"
C_GRID: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)  # SentEval's 2^-2 .. 2^4 (one power wider)
MAX_ITER = 5000
LANG_COLUMNS = ("language", "lang")  # XNLI's all-language dev/test files and MARC's JSONL carry one of these

Column = str | int  # a header name, or a 0-based index in a headerless file


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

# (convention, text columns, label column), tried in order; header names match case-insensitively.
CONVENTIONS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("XNLI", ("premise", "hypothesis"), "label"),
    ("XNLI/SNLI", ("sentence1", "sentence2"), "gold_label"),
    ("SICK", ("sentence_A", "sentence_B"), "entailment_judgment"),
    ("PAWS-X", ("sentence1", "sentence2"), "label"),
    ("MARC", ("review_body",), "stars"),
    ("single text", ("text",), "label"),
    ("single sentence", ("sentence",), "label"),
)
MLDOC_COLUMNS: tuple[tuple[int, ...], int] = ((1,), 0)  # headerless `label\ttext`
SUFFIXES = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}


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


def detect_columns(header: Sequence[str], path: str | Path = "header") -> tuple[tuple[str, ...], str]:
    """(text columns, label column) of the first built-in convention the header satisfies, spelt as in the
    header; InputError listing the header and every accepted convention when none fits."""
    by_lower = {h.strip().lower(): h for h in header}
    for _, texts, label in CONVENTIONS:
        wanted = (*texts, label)
        if all(w.lower() in by_lower for w in wanted):
            return tuple(by_lower[t.lower()] for t in texts), by_lower[label.lower()]
    accepted = "; ".join(f"{name}: {', '.join(texts)} + {label}" for name, texts, label in CONVENTIONS)
    raise InputError(str(path), f"no known transfer-task columns in header {list(header)}; accepted: {accepted}; "
                                f"MLDoc: headerless label<TAB>text (headerless=True)", line=1)


def _first_ragged_line(path: Path, sep: str) -> tuple[int, int, int] | None:
    with path.open(encoding="utf-8", errors="replace") as fh:
        expected = None
        for i, line in enumerate(fh, start=1):
            line = line.rstrip("\r\n")
            if not line:
                continue
            n = line.count(sep) + 1
            if expected is None:
                expected = n
            elif n != expected:
                return i, n, expected
    return None


def _read_delimited(path: Path, sep: str, headerless: bool) -> pl.DataFrame:
    quote = None if sep == "\t" else '"'
    try:
        return pl.read_csv(path, separator=sep, quote_char=quote, has_header=not headerless, infer_schema=False,
                           raise_if_empty=True)
    except pl.exceptions.NoDataError as err:
        raise InputError(str(path), "empty file") from err
    except pl.exceptions.ComputeError as err:
        ragged = _first_ragged_line(path, sep) if sep == "\t" else None
        if ragged:
            raise InputError(str(path), f"expected {ragged[2]} fields, found {ragged[1]}", line=ragged[0]) from err
        raise InputError(str(path), f"cannot be read as {'TSV' if sep == chr(9) else 'CSV'}: "
                                    f"{str(err).splitlines()[0]}") from err


def _read_jsonl(path: Path) -> tuple[pl.DataFrame, list[int]]:
    """JSONL read line by line (stdlib json) so every record keeps its exact file line; blank lines are skipped."""
    records, lines = [], []
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(str(path), f"invalid JSON: {err.msg}", line=i) from err
            if not isinstance(rec, dict):
                raise InputError(str(path), "expected a JSON object per line", line=i)
            records.append({k: None if v is None else str(v) for k, v in rec.items()})
            lines.append(i)
    if not records:
        raise InputError(str(path), "empty file")
    return pl.DataFrame(records, infer_schema_length=None), lines


def _column(df: pl.DataFrame, col: Column, path: Path) -> str:
    if isinstance(col, int):
        if not 0 <= col < df.width:
            raise InputError(str(path), f"column index {col} out of range: the file has {df.width} columns")
        return df.columns[col]
    if col not in df.columns:
        raise InputError(str(path), f"no column '{col}' in header {df.columns}", line=1)
    return col


def transfer_format(path: str | Path) -> str | None:
    """tsv, csv or jsonl by suffix (.txt is TSV); None for anything else (MLDoc's `german.train.1000`, a gzipped
    file: the readers take plain text)."""
    return file_format(path, SUFFIXES, gz=False)


def read_transfer_file(path: str | Path, text_cols: Sequence[Column] | None = None, label_col: Column | None = None,
                       lang: str | None = None, *, headerless: bool = False, fmt: str | None = None) -> TransferFile:
    """Texts and labels of one TSV/CSV/JSONL file (`fmt`, else by suffix; TSV unquoted). Columns default to the detected
    convention, or to MLDoc's `label\\ttext` when `headerless` (then columns are 0-based indices). `lang` keeps the
    rows of that language where the file has a language column (XNLI, MARC), else takes the file as that
    language. Rows with an empty text or label are returned in `bad_rows` with their line, never silently dropped."""
    path = Path(path)
    fmt = fmt or transfer_format(path)
    if fmt == "jsonl":
        if headerless:
            raise InputError(str(path), "headerless applies to TSV/CSV, not JSONL")
        df, lines = _read_jsonl(path)
    elif fmt in ("tsv", "csv"):
        df = _read_delimited(path, "," if fmt == "csv" else "\t", headerless)
        first = 1 if headerless else 2
        lines = list(range(first, first + df.height))
    else:
        raise InputError(str(path), f"unknown file type '{fmt or path.suffix}': expected .tsv, .txt, .csv or "
                                    f".jsonl, or fmt=tsv|csv|jsonl")

    if text_cols is None or label_col is None:
        default = MLDOC_COLUMNS if headerless else detect_columns(df.columns, path)
        text_cols = default[0] if text_cols is None else text_cols
        label_col = default[1] if label_col is None else label_col
    if not 1 <= len(text_cols) <= 2:
        raise InputError(str(path), f"expected 1 or 2 text columns, got {list(text_cols)}")
    names = [_column(df, c, path) for c in text_cols]
    label_name = _column(df, label_col, path)

    keep = np.ones(df.height, dtype=bool)
    if lang is not None:
        lang_col = next((c for c in df.columns if c.lower() in LANG_COLUMNS), None)
        if lang_col is not None:
            keep = (df[lang_col].fill_null("").str.strip_chars() == lang).to_numpy()

    cols = [df[n].to_list() for n in names]
    labels_raw = df[label_name].to_list()
    texts: list[list[str]] = [[] for _ in names]
    labels: list[str] = []
    bad: list[BadRow] = []
    for i in np.flatnonzero(keep):
        values = [c[i] for c in cols]
        label = (labels_raw[i] or "").strip()
        empty = [n for n, v in zip(names, values, strict=True) if v is None or not v.strip()]
        if empty or not label:
            reasons = [f"empty text in '{n}'" for n in empty] + ([f"missing label '{label_name}'"] if not label
                                                                    else [])
            bad.append(BadRow(lines[i], "; ".join(reasons)))
            continue
        for t, v in zip(texts, values, strict=True):
            t.append(v.strip())
        labels.append(label)
    return TransferFile(texts[0], texts[1] if len(texts) == 2 else None, labels, bad)


def check_labels(labels: Iterable[str], known: Iterable[str], where: str | Path, what: str = "training") -> None:
    """InputError naming the first label (and `where` it came from) that `known` lacks: a label unseen in
    training cannot be predicted, and one outside a task's label set means a mislabelled file."""
    known_set = set(known)
    unseen = sorted({str(x) for x in labels} - {str(k) for k in known_set})
    if unseen:
        raise InputError(str(where), f"label '{unseen[0]}' does not occur in {what} (known: {sorted(known_set)})"
                         + (f"; also {unseen[1:]}" if len(unseen) > 1 else ""))


def load_task_file(task: TransferTask, path: str | Path, lang: str | None = None,
                   text_cols: Sequence[Column] | None = None, label_col: Column | None = None, *,
                   headerless: bool | None = None) -> TransferFile:
    """`read_transfer_file` checked against the task: the number of text columns fits its kind and every label
    is in its label set. MLDoc files (`english.train.1000`, any suffix but .csv/.jsonl) default to headerless TSV."""
    fmt = transfer_format(path)
    if task.name == "mldoc" and fmt is None:
        fmt = "tsv"
    if headerless is None:
        headerless = task.name == "mldoc" and fmt == "tsv"
    data = read_transfer_file(path, text_cols, label_col, lang, headerless=headerless, fmt=fmt)
    n_texts = 1 if data.texts2 is None else 2
    if n_texts != task.n_texts:
        raise InputError(str(path), f"task '{task.name}' is a {task.kind} task but the file gives {n_texts} "
                                    f"text column(s)")
    if task.label_names:
        check_labels(data.labels, task.label_names, path, what=f"task '{task.name}' labels")
    return data


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


@dataclass
class TransferRun:
    result: TransferResult
    scores: list[Score]
    bad_rows: dict[str, list[BadRow]]  # file path -> its rows left out


def run_transfer(task: TransferTask, encode: Callable[[list[str]], np.ndarray], model: str, train: str | Path,
                 devs: Mapping[str, str | Path], tests: Mapping[str, str | Path], dataset: str | None = None,
                 seed: int = 0, c_grid: Sequence[float] = C_GRID, blas_threads: int | None = 1) -> TransferRun:
    """Files to Scores: load and check every file (a dev/test label unseen in training fails naming that file),
    encode, evaluate; the rows left out are returned per file for the caller to report."""
    train_data = load_task_file(task, train, "en")
    loaded = {"dev": {lang: load_task_file(task, p, lang) for lang, p in devs.items()},
              "test": {lang: load_task_file(task, p, lang) for lang, p in tests.items()}}
    paths = {"dev": devs, "test": tests}
    for split, parts in loaded.items():
        for lang, data in parts.items():
            check_labels(data.labels, train_data.labels, paths[split][lang])
    feats = {split: {lang: (task_features(task, encode, d), d.labels) for lang, d in parts.items()}
             for split, parts in loaded.items()}
    result = evaluate_transfer(task.name, (task_features(task, encode, train_data), train_data.labels),
                               feats["dev"], feats["test"], seed=seed, c_grid=c_grid, blas_threads=blas_threads)
    bad = {str(train): train_data.bad_rows}
    for split, parts in loaded.items():
        bad.update({str(paths[split][lang]): d.bad_rows for lang, d in parts.items()})
    return TransferRun(result, transfer_scores(model, dataset or task.name, result), bad)
