"""pydantic models of pipelines.yaml; every error names the file, pipeline, key and value before work starts."""

from __future__ import annotations

import copy
import hashlib
import logging
import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from amrsim.amr.backends import BACKENDS, DEFAULT_BACKEND, PIVOT_LANG, ParserSpec
from amrsim.encoders import PACKAGED, parse_name
from amrsim.errors import ConfigError
from amrsim.files import absent_reason, file_format, looks_like_path
from amrsim.langs import LANG_HINT, lang_code, no_language
from amrsim.methods import METHODS, method_params
from amrsim.metrics.engine import ALL_ASPECTS, MetricsOptions

# other amrsim modules are imported inside the functions: keeps this module cheap to import, free of cycles

SAMPLE_DIR = Path(__file__).parent / "sample"
SAMPLE_PREFIX = "sample:"
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")  # dataset names become directories: no '..', no '/'
RESERVED_DATASETS = {"eval", "meta", "models", "reports"}
# names of files evaluated one-off (`amrsim evaluate sts --file`): file_<stem>_<hash of the resolved path>; a pipeline's
# dataset may not start so, so the two can never share a name (and re-ingest over each other)
ONE_OFF_PREFIX = "file_"
KNOWN_ENCODERS = PACKAGED  # the encoders every install has

log = logging.getLogger(__name__)


class _SafeConfigLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key repeated in one mapping (the last would silently win) and reads `1e-5` as
    a float, as YAML 1.2 does (YAML 1.1 needs a dot, `1.0e-5`, and would give a string that strict floats refuse)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first_line: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` merges; keys after it override by design
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                seen = first_line.get(key)
            except TypeError:  # an unhashable key: SafeLoader reports it
                continue
            line = key_node.start_mark.line + 1
            if seen is not None:
                raise DuplicateKeyError(str(key)[:80], seen, line)
            first_line[key] = line
        return super().construct_mapping(node, deep=deep)


    def construct_document(self, node: yaml.Node) -> Any:
        _check_expanded_size(node)  # before building anything: the blow-up is in construction and validation
        return super().construct_document(node)


# Nodes the document would have with every alias expanded. pipelines.yaml of a few pipelines has hundreds; a
# "billion laughs" alias bomb composes to a few dozen shared nodes that expand to 10**9 objects.
MAX_EXPANDED_NODES = 100_000
MAX_COMMIT_ROWS = 10_000_000  # rows a stage holds in memory for one Delta commit


def _commit_rows(value: Any) -> Any:
    """Rows per commit: a whole number within bounds (a float such as 1e26, or 10**26 rows, is refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COMMIT_ROWS:
        raise ValueError(f"rows per Delta commit must be a whole number from 1 to {MAX_COMMIT_ROWS:,}")
    return value


CommitRows = Annotated[StrictInt, Field(ge=1, le=MAX_COMMIT_ROWS), BeforeValidator(_commit_rows)]


class AliasBudgetError(yaml.YAMLError):
    def __init__(self, problem: str, mark: yaml.Mark | None):
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


def _check_expanded_size(root: yaml.Node) -> None:
    """Raise AliasBudgetError when `root` expands (aliases as copies) past MAX_EXPANDED_NODES or refers to itself.
    Each distinct node is sized once (aliases share the node object), so this is linear in the composed nodes."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise AliasBudgetError("an alias refers to a node that contains it (infinite expansion)", node.start_mark)
        open_nodes.add(key)
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        total = 1
        for child in children:
            total += size(child)
            if total > MAX_EXPANDED_NODES:
                raise AliasBudgetError(f"aliases expand to more than {MAX_EXPANDED_NODES:,} nodes (an alias bomb?); "
                                       f"write the repeated parts out or use fewer nested aliases", child.start_mark)
        open_nodes.discard(key)
        sizes[key] = total
        return total

    size(root)


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: str, first: int, second: int):
        super().__init__(f"duplicate key '{key}' (lines {first} and {second})")
        self.line = second


_SafeConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def load_yaml_value(text: str) -> Any:
    """YAML text (pipelines.yaml, or a `--set key=value` value) as pipelines.yaml is read: safe, no repeated keys,
    `1e-5` a float."""
    return yaml.load(text, Loader=_SafeConfigLoader)


def dataset_name_error(name: str) -> str | None:
    """Why `name` cannot name a dataset (it becomes one directory under the warehouse root), or None."""
    if not NAME_RE.fullmatch(name) or name in RESERVED_DATASETS:  # fullmatch: '$' allows a trailing \n
        return f"dataset name {name!r} must match {NAME_RE.pattern} and not be one of {sorted(RESERVED_DATASETS)}"
    return None


def one_off_dataset(path: Path, translations: dict[str, Path] | None = None) -> str:
    """The dataset name of a file evaluated one-off: `file_<file stem>_<8 hex>`, the hex a hash of the resolved paths
    of the file and its row-aligned translation files. The same files always get the same name (their rows and
    embeddings are reused); another file of the same name gets another dataset; no pipeline dataset starts so."""
    stem = Path(path).name.lower()
    for suffix in (".gz", ".tsv", ".csv", ".jsonl", ".parquet"):
        stem = stem.removesuffix(suffix)
    stem = re.sub(r"[^a-z0-9_]+", "_", stem).strip("_")[:40].strip("_") or "data"
    files = [str(Path(path).resolve()), *(f"{lang}={Path(p).resolve()}" for lang, p in sorted((translations or {})
                                                                                              .items()))]
    digest = hashlib.sha256("\0".join(files).encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{ONE_OFF_PREFIX}{stem}_{digest}"


def _language(value: str, info: ValidationInfo) -> str:
    """A language as tables, parsers and translators key it ('de-DE' -> 'de'); the note for a dropped region or
    script goes to the validation context's `notes` (load_config prints them)."""
    code, note = lang_code(value)
    if code is None:
        raise ValueError(no_language(value) or f"'{value}' is not a language code ({LANG_HINT})")
    if note and isinstance(info.context, dict):
        info.context.setdefault("notes", []).append(note)
    return code


Lang = Annotated[str, AfterValidator(_language)]  # every language a config names: one check, one normal form


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RayConfig(_Strict):
    """Where row-parallel stages run: in-process (default), local Ray, or a cluster at `address`."""

    enabled: bool = False  # run row-parallel stages on Ray (a local Ray unless `address` is set)
    address: str | None = None  # "ray://head:10001", "head:6379" or "auto"; RAY_ADDRESS in the environment also works
    num_cpus: StrictInt | None = Field(default=None, ge=1)  # local Ray: CPUs to offer (default: detected)
    num_gpus: StrictInt | None = Field(default=None, ge=0)  # local Ray: GPUs to offer (default: detected)
    batch_size: StrictInt = Field(default=256, ge=1)  # rows per batch sent to a worker (parse: at least its own batch)
    connect_timeout_s: StrictFloat = Field(default=5.0, gt=0)  # a cluster address silent this long: ConfigError
    ship_code: bool = True  # cluster: send this checkout to the workers (runtime_env); false: the nodes' own install


Kind = Literal["pairs", "triples", "parallel", "sentences"]
Format = Literal["tsv", "csv", "jsonl", "parquet", "hf"]

# column roles each kind needs (required) and may use (optional)
KIND_COLUMNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "pairs": (("sentence1", "sentence2", "score"), ("id", "split", "lang", "lang1", "lang2", "amr1", "amr2")),
    "triples": (("premise", "entailment", "contradiction"), ("id", "split", "lang")),
    "parallel": (("source", "target"), ("id", "split", "lang", "target_lang")),
    "sentences": (("text",), ("id", "split", "lang")),
}
TEXT_ROLES = {
    "pairs": ("sentence1", "sentence2"),
    "triples": ("premise", "entailment", "contradiction"),
    "parallel": ("source", "target"),
    "sentences": ("text",),
}


class PairsToTriplesConfig(_Strict):
    """`kind: triples` read from an NLI-labelled *pairs* file (SICK): every entailment pair (A, B) becomes the triple
    (A, B, C), C a sentence labelled contradiction with A (either direction), else one labelled contradiction with
    B (A entails B, so A contradicts it too), else (`fallback: random`) a seeded random sentence of another pair.
    The item id records where C came from: `<id>/C<id>` (labelled with A), `/I<id>` (inferred via B), `/R<id>`."""

    sentence1: str = "sentence1"  # file column of A
    sentence2: str = "sentence2"  # file column of B
    label: str = "label"  # file column of the NLI label
    entailment: list[str] = Field(default_factory=lambda: ["entailment"], min_length=1)  # label values (any case)
    contradiction: list[str] = Field(default_factory=lambda: ["contradiction"], min_length=1)
    neutral: list[str] = Field(default_factory=lambda: ["neutral"])  # other valid labels; any other is a failed row
    infer: bool = True  # also take contradictions of B
    fallback: Literal["random", "skip"] = "random"  # no contradiction found: a random sentence, or a failed row
    seed: StrictInt = 0

    @model_validator(mode="after")
    def _labels(self) -> PairsToTriplesConfig:
        groups = {"entailment": self.entailment, "contradiction": self.contradiction, "neutral": self.neutral}
        seen: dict[str, str] = {}
        for group, values in groups.items():
            for v in values:
                if v.strip().lower() in seen:
                    raise ValueError(f"label '{v}' is listed under both {seen[v.strip().lower()]} and {group}")
                seen[v.strip().lower()] = group
        return self


class DatasetConfig(_Strict):
    """One input file and how its columns map onto a canonical table."""

    path: str  # file (tsv, csv, jsonl, parquet, optionally .gz), `sample:<file>` (bundled) or `hf:<dataset id>`
    kind: Kind  # the canonical table the rows become
    format: Format | None = None  # inferred from the file suffix when absent
    lang: Lang = "en"  # language of the text columns when no `lang` column is mapped
    lang2: Lang | None = None  # pairs: language of sentence2 when it differs from `lang` (then sentence1's language)
    target_lang: Lang | None = None  # parallel only: language of `target`
    columns: dict[str, str] = Field(default_factory=dict)  # role -> column name in the file
    # lang -> {role: column}; with `path`: a row-aligned file of its own (stsb_multi_mt: one file per language), whose
    # columns default to the main file's column names
    translations: dict[Lang, dict[str, str]] = Field(default_factory=dict)
    score_range: tuple[StrictFloat, StrictFloat] | None = None  # [min, max] of valid gold scores; outside: a failed row
    split: str | None = None  # split of every row when the file has no split column
    hf_split: str | None = None  # format hf: which split of the hub dataset to read
    from_pairs: PairsToTriplesConfig | None = None  # kind triples only: derive triples from NLI-labelled pairs

    @field_validator("score_range")
    @classmethod
    def _increasing(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not v[0] < v[1]:  # reversed or empty: every row would fail as out of range
            raise ValueError(f"score_range must be [min, max] with min < max, got {list(v)}")
        return v

    @model_validator(mode="after")
    def _columns_match_kind(self) -> DatasetConfig:
        required, optional = KIND_COLUMNS[self.kind]
        if self.from_pairs is not None:
            if self.kind != "triples":
                raise ValueError(f"from_pairs builds triples; kind is '{self.kind}'")
            derived = sorted(set(self.columns) & set(required))
            if derived:
                raise ValueError(f"from_pairs: columns must not map {derived} (they are derived from "
                                 f"from_pairs.sentence1/sentence2/label)")
            for lang, mapping in self.translations.items():
                if "path" not in mapping or set(mapping) - {"path", "format"}:
                    raise ValueError(f"from_pairs: translations.{lang} must be a row-aligned pairs file (path, "
                                     f"optionally format) with the columns from_pairs names")
        unknown = set(self.columns) - set(required) - set(optional)
        if unknown:
            raise ValueError(f"columns has roles {sorted(unknown)} that kind '{self.kind}' does not use; "
                             f"allowed: {sorted(required + optional)}")
        for lang, mapping in self.translations.items():
            bad = set(mapping) - set(TEXT_ROLES[self.kind]) - {"path", "format"}
            if bad:
                raise ValueError(f"translations.{lang} maps {sorted(bad)}; allowed: {list(TEXT_ROLES[self.kind])} "
                                 f"and path/format (a row-aligned file)")
            if "format" in mapping and "path" not in mapping:
                raise ValueError(f"translations.{lang}.format needs translations.{lang}.path")
        if self.lang2 is not None and self.kind != "pairs":
            raise ValueError(f"lang2 is the language of a pair's sentence2; kind is '{self.kind}'")
        if self.kind == "parallel" and not self.target_lang and "target_lang" not in self.columns:
            raise ValueError("kind 'parallel' needs target_lang (or a target_lang column)")
        return self

    def column(self, role: str) -> str | None:
        """The file's column for a role: the mapping, else the role's own name for required roles."""
        if role in self.columns:
            return self.columns[role]
        required, _ = KIND_COLUMNS[self.kind]
        return role if role in required else None

    def resolved_format(self) -> str:
        if self.format:
            return self.format
        if self.path.startswith("hf:"):
            return "hf"
        fmt = file_format(self.path)
        if fmt is not None:
            return fmt
        raise ValueError(f"cannot infer format of '{self.path}'; set format: tsv|csv|jsonl|parquet|hf")


def _check_encoder(name: str) -> str:
    try:
        parse_name(name)
    except ValueError:
        raise ValueError(f"unknown encoder '{name}'; use one of {list(KNOWN_ENCODERS)}, hf:<id|path> or "
                         "<method>:<run>") from None
    return name


class EncodeConfig(_Strict):
    encoders: list[str] = Field(default_factory=lambda: list(KNOWN_ENCODERS))  # minilm, muse, hf:<id>, <method>:<run>
    datasets: list[str] | None = None  # default: every dataset of the pipeline
    batch_size: StrictInt = Field(default=64, ge=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"  # auto: CUDA when present, else CPU

    _enc = field_validator("encoders")(lambda cls, v: [_check_encoder(x) for x in v])


class StsEvalConfig(_Strict):
    encoders: list[str] = Field(default_factory=lambda: list(KNOWN_ENCODERS))
    datasets: list[str] = Field(default_factory=list)  # pairs datasets of this pipeline
    splits: list[str] = Field(default_factory=lambda: ["test"])
    lang_pairs: list[str] = Field(default_factory=lambda: ["en-en"])  # "de-de", "en-de": sentence1 lang-sentence2 lang

    _enc = field_validator("encoders")(lambda cls, v: [_check_encoder(x) for x in v])

    @field_validator("lang_pairs")
    @classmethod
    def _pairs(cls, v: list[str]) -> list[str]:
        out = []
        for p in v:
            codes = [lang_code(side).code for side in p.split("-")]
            if len(codes) != 2 or None in codes:
                raise ValueError(f"lang pair '{p}' must be two language codes joined by '-', like 'en-de' "
                                 f"({LANG_HINT})")
            out.append("-".join(codes))  # type: ignore[arg-type]
        return out


class BitextEvalConfig(_Strict):
    """Tatoeba-style bitext retrieval: two-column row-aligned TSVs whose header names the two languages."""

    encoders: list[str] = Field(default_factory=lambda: list(KNOWN_ENCODERS))
    files: list[str] = Field(default_factory=list)  # paths or globs, relative to pipelines.yaml

    _enc = field_validator("encoders")(lambda cls, v: [_check_encoder(x) for x in v])


class TransferTaskConfig(_Strict):
    """One SentEval-style transfer task: train on `train` (English), pick C on the union of `dev`, test per
    language. Columns are detected (SICK-E, XNLI, PAWS-X, MARC, MLDoc conventions)."""

    train: str
    dev: dict[Lang, str] = Field(default_factory=dict)  # lang -> file
    test: dict[Lang, str] = Field(default_factory=dict)  # lang -> file
    kind: Literal["single", "pair"] | None = None  # needed for a task name amrsim does not know


class TransferEvalConfig(_Strict):
    encoders: list[str] = Field(default_factory=lambda: list(KNOWN_ENCODERS))
    tasks: dict[str, TransferTaskConfig] = Field(default_factory=dict)

    _enc = field_validator("encoders")(lambda cls, v: [_check_encoder(x) for x in v])


class AspectsEvalConfig(_Strict):
    """Spearman of encoder similarity (or a decomposed model's aspect sub-embedding) vs each AMR metric aspect."""

    encoders: list[str] = Field(default_factory=lambda: list(KNOWN_ENCODERS))
    datasets: list[str] = Field(default_factory=list)  # datasets with an amr_metrics table (the metrics stage)
    split: str | None = None

    _enc = field_validator("encoders")(lambda cls, v: [_check_encoder(x) for x in v])


class EvaluateConfig(_Strict):
    sts: StsEvalConfig | None = None
    bitext: BitextEvalConfig | None = None
    transfer: TransferEvalConfig | None = None
    aspects: AspectsEvalConfig | None = None
    report: bool = True  # write warehouse/reports/report.{html,md} after the evaluations


class MetricsConfig(_Strict):
    """AMR graph metrics over pairs whose sentences have graphs in the `amr` table."""

    datasets: list[str] = Field(default_factory=list)  # pairs datasets whose sentences have graphs
    parser: str = "provided"  # which parser's graphs to compare (`amr.parser`)
    aspects: list[str] | None = None  # default: all
    convention: Literal["amr", "smatch"] = "amr"  # Smatch triples: root concept in TOP (amr) or smatch 1.0.4's
    dereify: bool = False  # collapse reified nodes (have-mod-91 -> :mod) before the Smatch family and set aspects
    counting: Literal["set", "multiset"] = "set"  # set aspects: each value once per graph, or each occurrence
    vectors: str = "minilm"  # WWLK/graph-statistics node vectors: minilm, random or file:<glove.txt>
    seed: StrictInt = 0  # seeds Smatch restarts, random node vectors and WWLK draws (part of every row key)
    commit_rows: CommitRows = 20_000  # pairs per Delta commit: a crash loses at most one chunk

    @field_validator("aspects")
    @classmethod
    def _aspects(cls, v: list[str] | None) -> list[str] | None:
        bad = [a for a in v or [] if a not in ALL_ASPECTS]
        if bad:
            raise ValueError(f"unknown aspect(s) {bad}; choose from {list(ALL_ASPECTS)}")
        return v

    def options(self) -> Any:
        """The engine's MetricsOptions for this config (part of every amr_metrics row's key)."""
        return MetricsOptions(aspects=tuple(self.aspects or ALL_ASPECTS), convention=self.convention,
                              dereify=self.dereify, counting=self.counting, vectors=self.vectors, seed=self.seed,
                              extra={"parser": self.parser})


ParseBackend = Literal[tuple(BACKENDS)]  # type: ignore[valid-type]


class ParseConfig(_Strict):
    """Text to AMR: which backend parses which languages; other languages go through their English side."""

    datasets: list[str] | None = None  # default: every dataset of the pipeline
    backend: ParseBackend = DEFAULT_BACKEND  # ud: spaCy rules (en, fr); amrlib: parse_xfm (en)
    langs: list[Lang] | None = None  # parsed directly; default: every language the backend supports
    pivot: bool = True  # other languages: parse the English source sentence (parallel table), marked pivot_lang=en
    model_dir: str | None = None  # amrlib: a parse_xfm model directory
    commit_rows: CommitRows = 2_000  # sentences per Delta commit: a crash loses at most one chunk
    batch_size: StrictInt | None = Field(default=None, ge=1)  # default: the backend's own (ud 1000, amrlib 16)
    num_beams: StrictInt = Field(default=4, ge=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # amrlib: auto = bf16 on CUDA (fp16 without bf16), fp32 on the CPU; float32 reproduces fp32 runs exactly
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    # amrlib on CUDA: beam tokens per batch, auto = sized from free GPU memory at start; null: batch_size batches
    batch_budget: StrictInt | Literal["auto"] | None = "auto"
    linearize: Literal["paper", "pointer"] = "paper"  # the `linearized` column (MSE-AMR's AMR encoder input)

    @model_validator(mode="after")
    def _backend(self) -> ParseConfig:
        backend = BACKENDS[self.backend]
        bad = [lang for lang in self.langs or [] if lang not in backend.langs]
        if bad:
            raise ValueError(f"backend '{self.backend}' has no parser for {bad}; it parses {list(backend.langs)} "
                             f"(other languages: pivot through English with pivot: true)")
        if backend.model_dir and not self.model_dir:
            raise ValueError(f"backend '{self.backend}' needs model_dir: {backend.model_dir}")
        return self

    def direct_langs(self) -> tuple[str, ...]:
        return tuple(self.langs) if self.langs is not None else BACKENDS[self.backend].langs

    def parser_specs(self, resolve: Callable[[str], Path | str] = Path) -> dict[str, ParserSpec]:
        """A backend spec per language parsed directly, the model directory as `resolve(model_dir)` gives it."""
        model_dir = str(resolve(self.model_dir)) if self.model_dir else None
        return {lang: ParserSpec(self.backend, lang, model_dir, self.batch_size, self.num_beams, self.device,
                                 self.dtype, self.batch_budget)
                for lang in self.direct_langs()}


class TranslateConfig(_Strict):
    """Machine translation of a dataset's source-language sentences (`translations` table)."""

    datasets: list[str] | None = None
    backend: Literal["marian", "provided"] = "provided"  # provided: the input file's own translation columns
    source_lang: Lang = "en"
    targets: list[Lang] = Field(default_factory=list)  # marian: target languages, each needs a model
    models: dict[Lang, str] = Field(default_factory=dict)  # target lang -> hub id (Helsinki-NLP/opus-mt-en-de) or dir
    # source lang -> hub id (Helsinki-NLP/opus-mt-de-en) or dir: sentences in these languages are translated into
    # English (marian, whatever `backend` is), and the parse stage parses that English where no parser reads them
    to_english: dict[Lang, str] = Field(default_factory=dict)
    batch_size: StrictInt = Field(default=32, ge=1)
    num_beams: StrictInt = Field(default=4, ge=1)
    max_length: StrictInt = Field(default=256, ge=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # on CUDA: beam tokens per batch, auto = sized from free GPU memory at start; null: batch_size batches
    batch_budget: StrictInt | Literal["auto"] | None = "auto"

    @model_validator(mode="after")
    def _models(self) -> TranslateConfig:
        if self.backend == "marian":
            missing = [t for t in self.targets if t not in self.models]
            if missing:
                raise ValueError(f"no model configured for target language(s) {missing} "
                                 f"(translate.models has {sorted(self.models)})")
        return self

    @field_validator("to_english")
    @classmethod
    def _to_english(cls, v: dict[str, str]) -> dict[str, str]:
        for lang, model in v.items():  # keys are language codes already (Lang)
            if lang == PIVOT_LANG:
                raise ValueError("to_english: 'en' is English already; list the languages to translate from")
            if not model.strip():
                raise ValueError(f"to_english.{lang}: empty model (a hub id such as Helsinki-NLP/opus-mt-{lang}-en "
                                 f"or a model directory)")
        return v


class TrainConfig(_Strict):
    """One training run of a registered method; `params` are checked against the method's own `Params` model."""

    method: str  # a registered training method (its params are listed under Training parameters)
    params: dict[str, Any] = Field(default_factory=dict)  # the method's parameters (listed below)

    @field_validator("method")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in METHODS:
            raise ValueError(f"unknown training method '{v}'; available: {', '.join(sorted(METHODS)) or 'none yet'}")
        return v

    @model_validator(mode="after")
    def _params(self) -> TrainConfig:
        method_params(self.method, self.params)  # a ValidationError here names the bad key under train.params
        return self


class AugmentConfig(_Strict):
    """Silver pairs from bi-encoder nearest neighbours (Augmented SBERT / PEAR kNN re-sampling)."""

    datasets: list[str] = Field(default_factory=list)  # pairs datasets; their sentences of `lang` are the pool
    lang: Lang = "en"
    encoder: str = "minilm"  # the bi-encoder whose nearest neighbours become silver pairs
    k: StrictInt = Field(default=5, ge=1)  # neighbours per sentence
    index: Literal["exact", "hnsw", "ivf"] = "exact"  # exact inner product; hnsw/ivf for large sets
    # weak labels: "cosine" (the bi-encoder's own) or a trained cross-encoder such as pear:latest (PEAR)
    scorer: str = "cosine"
    splits: list[str] | None = ["train"]  # sentences of pairs in these splits (None: all); eval data stays unseen

    _enc = field_validator("encoder")(lambda cls, v: _check_encoder(v))

    @field_validator("scorer")
    @classmethod
    def _scorer(cls, v: str) -> str:
        # whether the model exists and scores pairs is checked when the stage runs: it may be trained later
        if v == "cosine" or re.match(r"^[a-z_0-9]+:[\w.-]+$", v):
            return v
        raise ValueError(f"unknown scorer '{v}'; use 'cosine' or a trained cross-encoder '<method>:<run>' "
                         "(e.g. pear:latest)")


class PipelineConfig(_Strict):
    """A named pipeline: its datasets and the parameters of each stage."""

    description: str = ""
    datasets: dict[str, DatasetConfig] = Field(default_factory=dict)  # name -> input; names become directories
    encode: EncodeConfig | None = None
    augment: AugmentConfig | None = None
    evaluate: EvaluateConfig | None = None
    metrics: MetricsConfig | None = None
    parse: ParseConfig | None = None
    translate: TranslateConfig | None = None
    train: list[TrainConfig] = Field(default_factory=list)  # methods `amrsim train` / the train flow runs
    ray: RayConfig = Field(default_factory=RayConfig)
    schedule: str | None = None  # cron for the refresh-dataset deployment; off when absent

    @field_validator("datasets")
    @classmethod
    def _names(cls, v: dict[str, DatasetConfig]) -> dict[str, DatasetConfig]:
        for name in v:
            if problem := dataset_name_error(name):
                raise ValueError(problem)
            if name.startswith(ONE_OFF_PREFIX):
                raise ValueError(f"dataset name '{name}': the prefix '{ONE_OFF_PREFIX}' is reserved for files "
                                 f"evaluated one-off (amrsim evaluate sts --file); rename it")
        return v

    @model_validator(mode="after")
    def _references(self) -> PipelineConfig:
        known = set(self.datasets)
        refs: list[tuple[str, str]] = []
        if self.metrics:
            refs += [("metrics.datasets", d) for d in self.metrics.datasets]
        if self.encode and self.encode.datasets:
            refs += [("encode.datasets", d) for d in self.encode.datasets]
        if self.parse and self.parse.datasets:
            refs += [("parse.datasets", d) for d in self.parse.datasets]
        if self.translate and self.translate.datasets:
            refs += [("translate.datasets", d) for d in self.translate.datasets]
        if self.evaluate and self.evaluate.sts:
            refs += [("evaluate.sts.datasets", d) for d in self.evaluate.sts.datasets]
            for d in self.evaluate.sts.datasets:
                if d in self.datasets and self.datasets[d].kind != "pairs":
                    raise ValueError(f"evaluate.sts.datasets: '{d}' is kind '{self.datasets[d].kind}', needs 'pairs'")
        if self.augment:
            refs += [("augment.datasets", d) for d in self.augment.datasets]
            for d in self.augment.datasets:
                if d in self.datasets and self.datasets[d].kind != "pairs":
                    raise ValueError(f"augment.datasets: '{d}' is kind '{self.datasets[d].kind}', needs 'pairs'")
        if self.evaluate and self.evaluate.aspects:
            refs += [("evaluate.aspects.datasets", d) for d in self.evaluate.aspects.datasets]
        for t in self.train:
            refs += [(f"train.{t.method}.params.{key}", d)
                     for key, d in method_params(t.method, t.params).dataset_refs()]
        for key, name in refs:
            if name not in known:
                raise ValueError(f"{key}: unknown dataset '{name}'; defined: {sorted(known)}")
        return self

    def parse_datasets(self) -> list[str]:
        return list(self.parse.datasets or self.datasets) if self.parse else []

    def translate_datasets(self) -> list[str]:
        return list(self.translate.datasets or self.datasets) if self.translate else []

    def encode_datasets(self) -> list[str]:
        if not self.encode:
            return []
        return list(self.encode.datasets or self.datasets)


def _input_files(pipe: PipelineConfig) -> list[tuple[str, str]]:
    """(config key, path) of every input file a pipeline names (bitext globs are expanded when used)."""
    files = []
    for ds_name, ds in pipe.datasets.items():
        if ds.resolved_format() != "hf":
            files.append((f"datasets.{ds_name}.path", ds.path))
        files += [(f"datasets.{ds_name}.translations.{lang}.path", m["path"])
                  for lang, m in ds.translations.items() if "path" in m]
    ev = pipe.evaluate
    if ev and ev.transfer:
        for t, task in ev.transfer.tasks.items():
            files.append((f"evaluate.transfer.tasks.{t}.train", task.train))
            files += [(f"evaluate.transfer.tasks.{t}.{split}.{lang}", path)
                      for split, paths in (("dev", task.dev), ("test", task.test)) for lang, path in paths.items()]
    if ev and ev.bitext:
        files += [("evaluate.bitext.files", p) for p in ev.bitext.files if not any(ch in p for ch in "*?[")]
    return files


class ProjectConfig(_Strict):
    """The whole pipelines.yaml."""

    # what a command runs when it names no pipeline; without it, the only pipeline (several: name one)
    default_pipeline: str | None = None
    warehouse: str = "warehouse"  # root of the Delta tables
    run_dir: str = ".amrsim"  # local run state: Prefect database (prefect/), local Ray temp dir (ray/)
    pipelines: dict[str, PipelineConfig]

    @field_validator("warehouse", "run_dir")
    @classmethod
    def _a_directory(cls, value: str) -> str:
        if not value.strip():  # '' resolves to the config's own directory: tables and state would land beside it
            raise ValueError("must name a directory (relative to this file, or absolute); it is empty")
        return value

    def dataset_conflict(self, exempt: Collection[tuple[str, str]] = ()) -> str | None:
        """Why two pipelines' datasets cannot share the warehouse, or None. Every pipeline writes the same warehouse,
        so one dataset name is one set of tables: the same definition in two pipelines (a benchmark both evaluate)
        builds the same tables and is allowed; two different definitions would overwrite each other's tables.
        `exempt`: (pipeline, dataset) pairs a `--set` override changed for one run (the warehouse's record of each
        dataset's source guards those, amrsim.warehouse.sources)."""
        first: dict[str, tuple[str, DatasetConfig]] = {}
        for pipe_name, pipe in self.pipelines.items():
            for ds_name, ds in pipe.datasets.items():
                if (pipe_name, ds_name) in exempt:
                    continue
                if ds_name not in first:
                    first[ds_name] = (pipe_name, ds)
                elif first[ds_name][1] != ds:
                    return (f"pipelines '{first[ds_name][0]}' and '{pipe_name}' define dataset '{ds_name}' "
                            f"differently; they share one warehouse, where its tables would overwrite each other: "
                            f"rename one, or make the two definitions identical")
        return None


class LoadedConfig:
    """A validated pipelines.yaml with paths resolved against its directory."""

    def __init__(self, path: Path, project: ProjectConfig):
        self.path = path
        self.project = project
        self.base = path.parent
        self.notes: list[str] = []  # what validation read differently from what was written ('de-DE' as 'de')
        self.overridden: set[tuple[str, str]] = set()  # (pipeline, dataset) a --set override changed for this run

    @property
    def warehouse_root(self) -> Path:
        return (self.base / self.project.warehouse).resolve()

    @property
    def run_dir(self) -> Path:
        return (self.base / self.project.run_dir).resolve()

    def pipeline_name(self, name: str | None = None) -> str:
        """`name`, else default_pipeline, else the only pipeline; a ConfigError when that leaves a choice."""
        return _choose_pipeline(self.path, list(self.project.pipelines), self.project.default_pipeline, name)

    def pipeline(self, name: str | None = None) -> tuple[str, PipelineConfig]:
        name = self.pipeline_name(name)
        if name not in self.project.pipelines:
            raise ConfigError(f"{self.path}: pipeline '{name}' not found; defined: {sorted(self.project.pipelines)}")
        pipe = self.project.pipelines[name]
        for key, value in _input_files(pipe):
            if not self.resolve_path(value).is_file():
                raise ConfigError(f"{self.path}: pipeline '{name}', key '{key}', value '{value}': "
                                  f"{absent_reason(self.resolve_path(value))} ({self.resolve_path(value)})")
        model_paths = []
        if pipe.parse and pipe.parse.model_dir:
            model_paths.append(("parse.model_dir", pipe.parse.model_dir))
        if pipe.translate and pipe.translate.backend == "marian":
            model_paths += [(f"translate.models.{t}", m) for t, m in pipe.translate.models.items()
                            if looks_like_path(m)]
        if pipe.translate:
            model_paths += [(f"translate.to_english.{t}", m) for t, m in pipe.translate.to_english.items()
                            if looks_like_path(m)]
        for key, value in model_paths:
            if not self.resolve_path(value).is_dir():
                raise ConfigError(f"{self.path}: pipeline '{name}', key '{key}', value '{value}': model directory "
                                  f"not found ({self.resolve_path(value)})")
        return name, pipe

    def resolve_path(self, path: str) -> Path:
        if path.startswith(SAMPLE_PREFIX):
            return SAMPLE_DIR / path[len(SAMPLE_PREFIX):]
        p = Path(path).expanduser()
        if p.is_absolute():
            return p
        try:
            return (self.base / p).resolve()
        except RuntimeError:  # a loop of symbolic links (Python 3.11): left unresolved, named where it is checked
            return Path(os.path.abspath(self.base / p))

    def section(self, name: str) -> Pipeline:
        """Pipeline `name`, resolved: what a stage receives (not this config and a name)."""
        if name not in self.project.pipelines:
            raise ConfigError(f"{self.path}: pipeline '{name}' not found; defined: {sorted(self.project.pipelines)}")
        return Pipeline(name, self.project.pipelines[name], self)


@dataclass(frozen=True)
class Pipeline:
    """One pipeline of a loaded config: its name, its validated section (`spec`) and the loaded config's paths.
    Stages take this; `where` starts their error messages."""

    name: str
    spec: PipelineConfig
    loaded: LoadedConfig

    @property
    def where(self) -> str:
        return f"{self.loaded.path}: pipeline '{self.name}'"

    @property
    def source(self) -> Path:
        return self.loaded.path

    @property
    def warehouse_root(self) -> Path:
        return self.loaded.warehouse_root

    def resolve_path(self, path: str) -> Path:
        return self.loaded.resolve_path(path)


def _format_error(source: Path, err: dict[str, Any], raw: dict[str, Any]) -> str:
    loc = [str(x) for x in err["loc"]]
    value = err.get("input")
    if loc[:1] == ["pipelines"] and len(loc) >= 2:
        where = f"pipeline '{loc[1]}', key '{'.'.join(loc[2:]) or '<pipeline>'}'"
    else:
        where = f"key '{'.'.join(loc) or '<top>'}'"
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    shown = repr(value) if not isinstance(value, dict) else "{...}"
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return f"{source}: {where}, value {shown}: {msg}"


def _choose_pipeline(source: Path, pipelines: list[str], default: str | None, name: str | None) -> str:
    if name:
        return name
    if default:
        return default
    if len(pipelines) == 1:
        return pipelines[0]
    raise ConfigError(f"{source}: no pipeline named and no default_pipeline set; name one of {sorted(pipelines)} "
                      f"on the command line, or set default_pipeline")


def validation_line(e: ValueError) -> str:
    """A ValidationError as one line, "key 'k', value 'v': why" (str(e) spans lines and ends with a URL)."""
    if not isinstance(e, ValidationError):
        return str(e)
    err = e.errors()[0]
    key = ".".join(str(x) for x in err["loc"])
    shown = repr(err.get("input"))
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return f"{f'key {key!r}, ' if key else ''}value {shown}: {err['msg'].removeprefix('Value error, ')}"


def _apply_override(raw: dict[str, Any], pipeline: str, dotted: str, value: Any) -> None:
    node = raw.setdefault("pipelines", {}).setdefault(pipeline, {})
    parts = dotted.split(".")
    for part in parts[:-1]:
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"override '{dotted}': '{part}' is not a mapping in pipeline '{pipeline}'")
        node = nxt
    node[parts[-1]] = value


def load_config(path: str | Path = "pipelines.yaml", overrides: dict[str, Any] | None = None,
                pipeline: str | None = None) -> LoadedConfig:
    """Read and validate pipelines.yaml; `overrides` are dotted keys into the chosen pipeline."""
    path = Path(path).resolve()
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        raw = load_yaml_value(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    except DuplicateKeyError as e:
        raise ConfigError(f"{path}:{e.line}: {e}") from None
    except AliasBudgetError as e:
        raise ConfigError(f"{path}:{e.problem_mark.line + 1 if e.problem_mark else 1}: {e.problem}") from None
    except RecursionError:  # the composer recurses once per level of nesting
        raise ConfigError(f"{path}: YAML nested too deeply (thousands of levels of [ or {{)") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{path}{line}: malformed YAML: {problem}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping with a 'pipelines' key, got {type(raw).__name__}")
    as_written, overridden = raw, set[tuple[str, str]]()
    if overrides:
        raw = copy.deepcopy(raw)
        pipelines = raw.get("pipelines")
        default = raw.get("default_pipeline")
        name = _choose_pipeline(path, list(pipelines) if isinstance(pipelines, dict) else [],
                                default if isinstance(default, str) else None, pipeline)
        for key, value in overrides.items():
            _apply_override(raw, name, key, value)
            if key == "datasets" or key.startswith("datasets."):  # these datasets differ for this run only
                changed = (value if isinstance(value, dict) else {}) if key == "datasets" else [key.split(".")[1]]
                overridden |= {(name, ds_name) for ds_name in changed}
    try:
        context: dict[str, list[str]] = {"notes": []}
        project = ProjectConfig.model_validate(raw, context=context)
    except ValidationError as e:
        raise ConfigError(_format_error(path, e.errors()[0], raw)) from None
    loaded = LoadedConfig(path, project)
    loaded.notes = [f"{path}: {note}" for note in dict.fromkeys(context["notes"])]
    loaded.overridden = overridden
    for note in loaded.notes:
        log.warning("%s", note)
    for name, pipe in project.pipelines.items():
        for ds_name, ds in pipe.datasets.items():
            try:
                ds.resolved_format()
            except ValueError as e:
                raise ConfigError(f"{path}: pipeline '{name}', key 'datasets.{ds_name}.format', "
                                  f"value {ds.format!r}: {e}") from None
    if conflict := project.dataset_conflict(overridden):
        raise ConfigError(f"{path}: {conflict}")
    if overridden:  # the file as written must still define each dataset one way
        try:
            written = ProjectConfig.model_validate(as_written, context={"notes": []})
        except ValidationError:
            written = None  # an override may complete what the file lacks; the overridden config validated
        if written is not None and (conflict := written.dataset_conflict()):
            raise ConfigError(f"{path}: {conflict}")
    if project.default_pipeline is not None and project.default_pipeline not in project.pipelines:
        raise ConfigError(f"{path}: key 'default_pipeline', value '{project.default_pipeline}': no such pipeline; "
                          f"defined: {sorted(project.pipelines)}")
    return loaded
