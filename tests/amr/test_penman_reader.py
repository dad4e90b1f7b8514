"""The C PENMAN reader: penman's graph on every shared graph; the Python path (and today's errors) for the rest."""

from __future__ import annotations

import gc
import gzip
import json
import random
import re
import tracemalloc

import penman
import pytest
from penman.layout import POP, Push

from amrsim.amr import _penman_reader
from amrsim.amr.graph import (
    AMRError,
    Surface,
    parse,
    parse_python,
    read_surface,
    read_triples,
    smatch_triples,
    surface_of,
    surface_triples,
)
from amrsim.metrics.smatch import Labels, encode_graph
from tests.helpers import shared

BOY = """# ::id 1 ::date 2012
# ::snt The boy wants to go.
(w / want-01
   :ARG0 (b / boy)
   :ARG1 (g / go-02
            :ARG0 b))"""


def read(text, graph: bool = True):
    return _penman_reader.read(text, Push, POP, graph)


class FusedEncoding:
    """read_encoded (text straight to Smatch's encoding) next to encode_graph(read_triples(text)), each with its own
    label table per convention: the same bytes, counts and label ids, or None where the Python path reads the text."""

    def __init__(self) -> None:
        self.tables = {c: (Labels(), Labels()) for c in ("smatch", "amr")}

    def check(self, text) -> bool:
        """True if the C path encoded text (asserting it equals the reference), False if it left it to Python."""
        fused_any = False
        for convention, (fused, ref) in self.tables.items():
            smatch = convention == "smatch"
            got = _penman_reader.read_encoded(text, smatch, fused.ids, fused.norm, fused.eq, fused.spans)
            assert (got is None) == (_penman_reader.read_smatch(text, Push, POP, 2, smatch) is None), text
            if got is None:
                continue
            want = encode_graph(read_triples(text, convention), ref)
            assert got == (want.data, want.triples, want.nodes), (convention, text)
            fused_any = True
        return fused_any

    def same_labels(self) -> bool:
        """Both paths gave every label the same id (in the same order: equal bytes need no more, this says why)."""
        return all(fused.ids == ref.ids for fused, ref in self.tables.values())


def outcome(parse_fn, text):
    """What a parse function makes of text: the error message, or everything consumers read of the graph."""
    try:
        g = parse_fn(text)
    except AMRError as e:
        return ("error", str(e))
    return ("graph", g.triples, g.top, repr(list(g.epidata.items())), g.metadata, g._amrsim_surface,
            [smatch_triples(g, "smatch"), smatch_triples(g, "amr"), smatch_triples(g, "amr", dereify=True)])


def surface_outcome(read_fn, text):
    try:
        return ("surface", read_fn(text))
    except AMRError as e:
        return ("error", str(e))


def assert_read_as_penman(text: str) -> None:
    """The C reader handles text, and parse gives exactly what penman and the Python tokenizer give."""
    assert read(text) is not None and read(text, False) is not None
    fast, ref = outcome(parse, text), outcome(parse_python, text)
    assert fast[0] == "graph" and fast == ref
    penman_graph = penman.decode(text)
    assert fast[1] == penman_graph.triples and fast[2] == penman_graph.top
    assert smatch_triples(text) == smatch_triples(parse_python(text))  # the string path (surface only)


def shared_graphs() -> list[str]:
    """Every PENMAN graph in ../shared/data: BAMBOO (all files, both sides), Little Prince, the examples."""
    texts: list[str] = []
    for path in sorted(shared("amr_bamboo").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                texts += [row["amr1"], row["amr2"]]
    with open(shared("amr_little_prince", "little_prince_v3.0.jsonl"), encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            texts += [row["amr"], row["raw"]]
    blocks = [shared("amr_little_prince", "amr-bank-struct-v3.0.txt"),
              *sorted(p for p in shared("amr_examples").glob("*.txt") if p.name != "PROVENANCE.txt")]
    for path in blocks:
        texts += [b for b in re.split(r"\n\s*\n", path.read_text(encoding="utf-8")) if b.strip()]
    return list(dict.fromkeys(texts))


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("every", [7, pytest.param(1, marks=pytest.mark.long)], ids=["every-7th", "all"])
def test_every_shared_graph_reads_as_penman(every):
    """`make test` reads every 7th graph of every corpus (about 8,000: each corpus, kind and size), `make test-long`
    all of them."""
    texts = shared_graphs()
    assert len(texts) > 50_000
    texts = texts[::every]
    errors = []
    encodings = FusedEncoding()
    for text in texts:
        ref = outcome(parse_python, text)
        if ref[0] == "error":  # a graph today's path rejects must be left to it, with the same message
            assert read(text) is None and outcome(parse, text) == ref
            assert not encodings.check(text)
            errors.append(ref[1])
            continue
        assert encodings.check(text), text  # Smatch's encoding straight from the text, as from its triples
        assert read(text) is not None, text  # no valid shared graph needs the slow path
        assert outcome(parse, text) == ref, text  # the reference graph is penman.decode(text)'s
        assert surface_of(text) == ref[5], text  # smatch_triples(text) reads the surface alone
        # the string paths build the triples in C (read_smatch); the Python rules on penman's graph are the reference
        assert [smatch_triples(text, "smatch"), smatch_triples(text, "amr")] == ref[6][:2], text
        assert [read_triples(text, "smatch"), read_triples(text, "amr")] == ref[6][:2], text
    # BAMBOO para 2161; Little Prince's header
    assert errors == ["undefined variable a2", "undefined variable e"] if every == 1 else \
        set(errors) <= {"undefined variable a2", "undefined variable e"}
    assert encodings.same_labels() and len(encodings.tables["amr"][0].ids) > 10_000 // every


@pytest.mark.parametrize("text, message", [
    ("(a / b :ARG0 (c / d)", "unbalanced parentheses"),
    ("(a / b))", "unbalanced parentheses"),
    ("", "empty graph"),
    ("   \n ", "empty graph"),
    ("# ::snt only a sentence\n# ::id 3", "only metadata, no graph"),
    ("(a / b :ARG0 (a / c))", "duplicate variable a"),
    ("(a / b :ARG0 y)", "undefined variable y"),
    ("(a / b :ARG0 (c / d :ARG1 x2))", "undefined variable x2"),
    ("(a :ARG0 (c / d))", "missing concept for variable a"),
    ("(a / b :ARG0 (c / ))", "missing concept for variable c"),
    ("(a / b) (c / d)", "more than one graph (content after the root closed)"),
    ('(a / b :op1 "open)', "unterminated quote"),
    ("(a / b :ARG0)", "role :ARG0 has no value"),
    ("(a / b :)", "empty role ':'"),
    ("(a / b / c)", "unexpected '/'"),
    ("x (a / b)", "graph must start with '(' (got 'x')"),
    ("(a / b~)", "penman could not read the graph: \n  line 1\n    (a / b~)\n          ^\nDecodeError: Expected: ROLE"),
])
def test_bad_input_takes_the_python_path_with_todays_message(text, message):
    assert read(text) is None and read(text, False) is None
    assert not FusedEncoding().check(text)
    assert outcome(parse, text) == ("error", message) == outcome(parse_python, text)
    if not message.startswith("penman"):  # the string path reads the surface only
        with pytest.raises(AMRError) as e:
            smatch_triples(text)
        assert str(e.value) == message


def test_not_a_string_takes_the_python_path():
    for value, message in [(None, "expected a string, got NoneType"), (3, "expected a string, got int"),
                           (b"(a / b)", "expected a string, got bytes")]:
        assert read(value) is None
        with pytest.raises(AMRError) as e:
            parse(value)  # type: ignore[arg-type]
        assert str(e.value) == message


@pytest.mark.parametrize("text", [
    BOY,
    "(a / b)",
    '(c / City :name (n / name :op1 "New York" :op2 "Big_Apple") :wiki "Q60" :polarity -)',
    '(s / say-01 :ARG1 "a (b): c ~e.1 # x" :time "12:30")',
    "(h / höhle :mod (z / 中国) :name (n / name :op1 \"Zoë\") :quant ٣ :mod 北京)",
    "(a / b :ARG0-of (c / d) :ARG1-of a :consist-of (e / f) :mod-of e :poss-of \"x\" :ARG2-of -)",
    "(a / b :ARG0 (c / d :ARG1 a) :ARG1-of c)",  # a duplicated triple: penman keeps the first one's epigraph
    "(a / b :ARG0 (c / d :ARG1 (e / f :ARG2 (g / h))) :ARG3 (i / j :ARG0 g))",  # POPs pile up on one triple
    "(g / go-02 :mode imperative :polarity - :quant 3 :li a :polarity x1 :mode ab :ARG0 abcd :op1 a1b)",
    "(a / b :TOP cc-1 :instance thing :-of a :ARG0 -0.5e3 :ARG1 www.x.y)",
    "# ::id 7\r\n# ::snt CRLF\r\n(a / b\r\n  :ARG0 (c / d))\r\n\r\n",
    "  # only a note\n\t#::snt tabs\n(a / b)   \n",
    "# ::id x ::snt a\x12b\x00c\n(a / b :op1 \"\x00\" :op2 x\x7fy)",
    "(a/b :ARG0(c/d :ARG1\"e\"))",
    "(\ud800 / \udcff :op1 \"\udcfe\")",  # lone surrogates, as bytes decoded with surrogateescape give
    "(n0 / root" + "".join(f" :ARG0 (n{i} / c{i}" for i in range(1, 100)) + ")" * 100,
])
def test_graphs_the_c_reader_handles(text):
    assert_read_as_penman(text)


@pytest.mark.parametrize("text", [
    "(a / b~e.1 :ARG0~e.2 (c / d~e.3))",  # alignments
    '(a / b :op1 "x\\"y")',  # an escaped quote
    "(a / b :time 10:30)",  # one symbol to the Python tokenizer, two tokens to penman
    "(a/b:ARG0(c/d))",
    "(a /\u00a0b :ARG0 (c / d))",  # Unicode whitespace
    "(a / b\v:ARG0 (c / d))",
    "(a / b\n# a note inside\n:ARG0 (c / d))",  # penman fails on a comment inside the graph
    "(a / b)\n# a note after\n",
    '(a / "b")',  # a string concept
    '(a / b :op1 "two\nlines")',
    "(a / b#c)",
    "(a / b\\c)",
    "(n0 / root" + "".join(f" :ARG0 (n{i} / c{i}" for i in range(1, 200)) + ")" * 200,  # deeper than MAX_DEPTH
])
def test_unusual_graphs_take_the_python_path(text):
    assert read(text) is None
    assert outcome(parse, text) == outcome(parse_python, text)


@pytest.mark.parametrize("text", [BOY, "(a / b :ARG0 (c / d :mod \"x y\") :ARG1-of (e / f :ARG2 c) :li 2)",
                                  "(n0 / root" + "".join(f" :ARG0 (n{i} / c{i}" for i in range(1, 200)) + ")" * 200,
                                  "(a / b :ARG0 c)", "(a / b\v:ARG0 (c / d))"])
def test_surface_mode_with_graph_limits(text):
    """read(..., 2): what graph mode accepts (its depth limit too), as the surface alone (read_triples' path)."""
    full, surface = read(text), read(text, 2)
    assert (full is None) == (surface is None)
    if full is not None:
        assert surface == full[:3] == read(text, False)


@pytest.mark.parametrize("text", [
    '(a / b :ARG0-of (c / d) :mod (e / f) :mod "g h" :ARG1-of "x y" :consist-of (i / j) :prep-out-of "k" :op1 "Q R_"'
    ' :op2 Foo_ :polarity - :li 2 :quant 3 :mode imperative :wiki "-" :name (n / name :op1 "  ") :time "__")',
    '(X / Want-01_ :ARG0 (b / BOY) :mod-of "c" :ARG2 "" :ARG3 "x\ty z" :Mod (m / m2))',
    "(a / b)", BOY])
def test_smatch_triples_in_c_equal_the_python_rules(text):
    """read_smatch: `surface_triples`' rules (inversions and their exceptions, :mod, constants cut or kept, quotes,
    case, TOP) in C, on edge cases of each rule."""
    for convention in ("smatch", "amr"):
        ref = surface_triples(read_surface(text), convention)
        assert smatch_triples(text, convention) == ref == read_triples(text, convention)
        assert _penman_reader.read_smatch(text, Push, POP, 0, convention == "smatch") is not None
    encodings = FusedEncoding()
    assert encodings.check(text) and encodings.same_labels()


@pytest.mark.slow
@pytest.mark.integration
def test_pair_encodings_equal_a_fresh_tables_on_every_shared_pair():
    """encode_pair (what align_texts aligns: both graphs read and encoded without the GIL, a label table of the pair's
    own) gives the bytes and counts read_encoded gives with a fresh table, on every two neighbouring shared graphs,
    both conventions; it leaves to the Python path exactly the pairs with a text not ASCII or one read_encoded
    leaves."""
    texts = shared_graphs()
    encoded = 0
    for a, b in zip(texts, texts[1:], strict=False):
        for smatch in (True, False):
            got = _penman_reader.encode_pair(a, b, smatch)
            labels = Labels()
            want = [_penman_reader.read_encoded(t, smatch, labels.ids, labels.norm, labels.eq, labels.spans)
                    for t in (a, b)]
            if not (a.isascii() and b.isascii()) or None in want:
                assert got is None, (a, b)
                continue
            assert got == (want[0][0], want[0][1], want[1][0], want[1][1]), (smatch, a, b)
            encoded += 1
    assert encoded > 0.98 * 2 * len(texts)


def test_pair_encoding_rules_on_ascii_edge_cases():
    """The pair reader's own label rules (lower-cased, trailing '_' cut, '=' for values, a quoted constant's first
    word under the smatch convention) on the edge cases of each, against read_encoded with a fresh table."""
    cases = ['(a / B_ :ARG0 (b / b__) :op1 "X  y_" :op2 "" :op3 " " :op4 "_" :mod "a b" :name x_ :li 2)',
             '(a / =b :ARG1-of (c / i) :ARG0-of "q r" :domain-of (d / s) :prep-out-of 5 :consist-of (f / TOP))',
             '(a / top :mod (b / top) :mod 3 :polarity - :ARG0 a :wiki "Fo\tx" :op1 "\tA_\tb")',
             "(a / b)", '(a / b :op1 "A\tB_ c" :ARG2-of "Z_" :ARG3-of Q_)']
    for a in cases:
        for b in cases:
            for smatch in (True, False):
                labels = Labels()
                want = [_penman_reader.read_encoded(t, smatch, labels.ids, labels.norm, labels.eq, labels.spans)
                        for t in (a, b)]
                assert None not in want, (a, b)
                assert _penman_reader.encode_pair(a, b, smatch) == (want[0][0], want[0][1], want[1][0], want[1][1])
    assert _penman_reader.encode_pair("(a / b)", "(a / é)", True) is None
    assert _penman_reader.encode_pair("(a / b)", None, True) is None


def test_encoding_finds_a_label_by_its_text_whatever_the_strings_kind():
    """read_encoded's C cache keys labels by code points: a label first seen in a Latin-1 string is found again in
    UCS-2 and UCS-4 strings (and a variable named like a label is still a variable)."""
    encodings = FusedEncoding()
    for text in ["(a / höhle :mod (h / Haus))", "(b / höhle :mod (c / 中国) :ARG0 (h / haus))",
                 "(x / 😀 :mod (y / höhle) :op1 \"中国\" :op2 höhle)", "(höhle / höhle :ARG1 höhle)",
                 "(a / höhle :mod (h / Haus))"]:
        assert encodings.check(text), text
    assert encodings.same_labels()
    fused = encodings.tables["amr"][0]
    assert sum(label == "höhle" for label in fused.ids) == 1


def test_encoding_needs_its_label_cache():
    labels = Labels()
    with pytest.raises((TypeError, ValueError)):
        _penman_reader.read_encoded("(a / b)", True, labels.ids, labels.norm, labels.eq, None)


def test_deep_nesting_surface_reads_in_c():
    deep = "(n0 / root" + "".join(f" :ARG0 (n{i} / c{i}" for i in range(1, 5000)) + ")" * 5000
    assert read(deep) is None  # penman's recursive parser decides the graph (today: AMRError)
    assert Surface(*read(deep, False)) == read_surface(deep)
    assert outcome(parse, deep) == outcome(parse_python, deep)


PIECES = ["(", ")", "/", ":ARG0", ":ARG1-of", ":mod", ":polarity", ":", " ", "\n", "\r\n", "\t", "a", "b", "c1",
          "x2", "-", "imperative", '"', '"s t"', "~e.1", "#", "# ::snt x\n", "\\", "\x00", "\v", "\u00a0", "\u2028",
          "\ud800", "中", "٣", "10:30", "ab", "thing"]


def random_text(rng: random.Random) -> str:
    if rng.random() < 0.5:  # a mutated graph: mostly valid, so the C path is exercised too
        text = BOY if rng.random() < 0.5 else "(a / b :ARG0 (c / d :mod \"x y\") :ARG1-of (e / f :ARG2 c) :li 2)"
        for _ in range(rng.randint(0, 3)):
            i = rng.randrange(len(text) + 1)
            op = rng.random()
            if op < 0.4:
                text = text[:i] + text[i + 1:]
            elif op < 0.8:
                text = text[:i] + rng.choice(PIECES) + text[i:]
            else:
                j = rng.randrange(len(text) + 1)
                text = text[:min(i, j)] + text[max(i, j):]
        return text
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30)))


def test_random_strings_read_or_fall_back():
    rng = random.Random(22)
    handled = encoded = 0
    encodings = FusedEncoding()
    for _ in range(4000):
        text = random_text(rng)
        encoded += encodings.check(text)
        fast = read(text)
        ref = outcome(parse_python, text)
        if fast is not None:  # whatever the C reader accepts, the Python path reads the same
            handled += 1
            assert ref[0] == "graph", text
        assert outcome(parse, text) == ref, text
        assert surface_outcome(surface_of, text) == surface_outcome(read_surface, text), text
    assert handled > 800 and encoded > 800  # the fuzzing reaches the C paths, not only their refusals
    assert encodings.same_labels()


def test_hostile_inputs():
    for text in ["(" * 1_000_000, ")" * 1_000_000, "a" * 1_000_000, '(a / b :op1 "' + "x" * 1_000_000 + '")',
                 "(a / b" + " :op1 -" * 200_000 + ")", "\x00" * 1000, "(a / b :op1 \"\x00\")" + "\x00",
                 "(" + "\udcff" * 10_000 + " / b)", "#" * 100_000, "# x\n" * 100_000]:
        for graph in (True, False):
            r = read(text, graph)
            assert r is None or len(r) == (6 if graph else 3)
        labels = Labels()
        encoded = _penman_reader.read_encoded(text, True, labels.ids, labels.norm, labels.eq, labels.spans)
        assert encoded is None or encoded[2] >= 1
        pair = _penman_reader.encode_pair(text, text, True)
        assert (pair is None) == (encoded is None or not text.isascii())
        assert pair is None or pair[0] == pair[2] == encoded[0]
    wide = "(a / b" + " :op1 -" * 200_000 + ")"
    assert len(read(wide)[3]) == 200_001


def test_reader_does_not_leak():
    # names longer than one character: one-character strings are shared singletons, a lost reference to them
    # would not show as memory
    texts = [BOY, '# ::snt x\n(xv0 / want-01 :ARG0 (xv1 / boy) :ARG1-of (xv2 / go-02 :ARG0 xv1 :op1 "s t"))',
             "(xv0 / bb :ARG0 yy)", "(xv0 / bb :ARG0 (xv0 / cc))", "(xv0 / bb~e.1)",
             "(n0 / r" + "".join(f" :ARG0 (n{i} / c" for i in range(1, 150)) + ")" * 150, '(xv0 / "bb")',
             "(xv0 / bb) x", "", "# only\n"]
    labels = Labels()

    def read_all(text):
        read(text), read(text, False), _penman_reader.read_smatch(text, Push, POP, 2, True)
        _penman_reader.read_encoded(text, False, labels.ids, labels.norm, labels.eq, labels.spans)

    for text in texts:  # warm up caches (interned strings, dict sizes, the label table)
        read_all(text)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(3000):
            for text in texts:
                read_all(text)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 20_000, f"{grown} bytes left after 3,000 rounds of every read"
