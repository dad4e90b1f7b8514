/* PENMAN reading in one pass: the graphs AMR metrics see, or None for the Python path (_read_surface + penman).
 *
 * read(text, push, pop, graph) -> None | (variables, concepts, edges)                       when graph is false or 2
 *                                     | (variables, concepts, edges, triples, epidata, comments)  when true
 *   graph=2 accepts exactly what graph mode accepts (its depth limit) but builds only the surface: the Smatch
 *   triples of a text read this way equal those of its penman graph, at the cost of the surface alone.
 *   variables, concepts: tuples of str in order of definition (the first variable is the top);
 *   edges: tuple of (source, role without colon, target, target-is-constant), as amrsim.amr.graph._read_surface;
 *   triples: list of (source, role, target), exactly penman.decode(text).triples (default model: a role ending in
 *   -of is inverted, towards a constant it is kept as written); epidata: penman's epigraph (Push(var) on the triple
 *   that opens a node, POP on the last triple of a closed node, first of duplicated triples wins); comments: the
 *   '#...' lines before the graph, for penman's metadata. push / pop are penman.layout.Push and POP.
 *
 * read_smatch(text, push, pop, mode, smatch) -> None | Smatch triples (variables, instances, attributes, relations)
 * read_encoded(text, smatch, ids, norm_cache, eq_cache, label_cache) -> None | (encoding, triples, nodes): those
 *   triples as _smatch_core.encode packs them (_smatch_encoding.h), built from the text's spans without the triples'
 *   tuples: variables in a C table, labels seen before found by their text in label_cache (a C table per label table).
 *   Both apply one set of rules (smatch_edges), so they refuse the same texts and agree on every graph.
 *
 * Handled: '#' lines before the graph, then one graph of nodes '(' var '/' concept (role target)* ')', targets a
 * node, a symbol or a "string" without backslash or line break. Anything else returns None, so the Python path
 * produces its result or its exact error: whitespace other than space/tab/CR/LF, '~'
 * (alignments), '#' or '\' outside comments and strings, a symbol or role running into ':', a string concept or
 * variable, duplicate or undefined variables, content after the graph, and (graph mode) nesting deeper than
 * MAX_DEPTH, where penman's recursive parser may run out of stack. No recursion here, so any depth is safe.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_smatch_encoding.h"

#define MAX_DEPTH 100

enum { T_LP, T_RP, T_SLASH, T_ROLE, T_SYM, T_STR, T_END, T_BAD };
enum { IT_NODE, IT_ATOM, IT_CLOSE };

typedef struct {
    Py_ssize_t start, end;
} Span;

typedef struct {
    int kind;
    Py_ssize_t source, node; /* node indices; source -1 for the root */
    Span role, atom;         /* role with its colon; an atomic target as written */
} Item;

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t n, pos;
} Lexer;

typedef struct {
    Item *items;
    Py_ssize_t nitems, cap_items;
    Span *concepts; /* one per variable */
    Py_ssize_t cap_concepts;
    Py_ssize_t *stack; /* open nodes */
    Py_ssize_t depth, cap_stack, max_depth;
    Span *comments;
    Py_ssize_t ncomments, cap_comments;
    Py_ssize_t nvars;    /* variables defined so far */
    /* variables as str (list in order of definition, dict name -> index), or, where both are NULL (read_encoded),
     * as spans in an open-addressing table (no Python object per variable) */
    struct VarSlot *var_slots;
    Py_ssize_t cap_var_slots;
    PyObject *variables; /* list of str, in order of definition */
    PyObject *defined;   /* dict: variable -> its index in variables */
} Reader;

static PyObject *INSTANCE_ROLE; /* ":instance" */

#define CH(lx, i) PyUnicode_READ((lx)->kind, (lx)->data, (i))

/* FNV-1a over a span's code points (the same text hashes alike whatever its string kind) */
static uint64_t span_hash(const void *data, int kind, Py_ssize_t start, Py_ssize_t end, uint64_t seed) {
    uint64_t h = 1469598103934665603ULL ^ seed;
    for (Py_ssize_t i = start; i < end; i++) {
        h ^= (uint64_t)PyUnicode_READ(kind, data, i);
        h *= 1099511628211ULL;
    }
    return h;
}

struct VarSlot {
    uint64_t hash;
    Py_ssize_t start, end, index; /* index -1: empty */
};

static int is_space(Py_UCS4 c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Whitespace other than space, tab, CR, LF (\v, \f, \x1c-\x1f, \x85, U+00A0, U+2028...): the Python tokenizer
 * splits tokens on it, penman's lexer does not, and both split lines on some of it; a text holding one goes to the
 * Python path. Every other character (NUL and other controls included) is an ordinary symbol character to both. */
static int is_refused(Py_UCS4 c) { return !is_space(c) && Py_UNICODE_ISSPACE(c); }

/* Ends a symbol or role. */
static int ends_token(Py_UCS4 c) {
    return is_space(c) || c == '(' || c == ')' || c == '"' || c == '/' || c == ':' || c == '~' || c == '#' ||
           c == '\\';
}

/* Ends a symbol or role where the readers disagree: the Python tokenizer reads "10:30" as one symbol, penman as two
 * tokens; '~' starts a penman alignment; '#' and '\' are left to the Python path. */
static int ends_badly(Py_UCS4 c) { return c == ':' || c == '~' || c == '#' || c == '\\'; }

static int next_token(Lexer *lx, Span *span) {
    Py_ssize_t i = lx->pos, n = lx->n;
    while (i < n && is_space(CH(lx, i))) i++;
    lx->pos = i;
    if (i >= n) return T_END;
    Py_UCS4 c = CH(lx, i);
    Py_ssize_t j = i + 1;
    int type;
    if (c == '(') type = T_LP;
    else if (c == ')') type = T_RP;
    else if (c == '/') type = T_SLASH;
    else if (c == '"') {
        while (j < n && CH(lx, j) != '"') {
            Py_UCS4 d = CH(lx, j);
            if (d == '\\' || d == '\n' || d == '\r') return T_BAD; /* escapes; penman reads line by line */
            j++;
        }
        if (j >= n) return T_BAD; /* unterminated */
        j++;
        type = T_STR;
    } else if (c == '~' || c == '#' || c == '\\') return T_BAD;
    else {
        type = c == ':' ? T_ROLE : T_SYM;
        while (j < n && !ends_token(CH(lx, j))) j++;
        if (j < n && ends_badly(CH(lx, j))) return T_BAD;
        if (type == T_ROLE && j == i + 1) return T_BAD; /* empty role */
    }
    span->start = i;
    span->end = j;
    lx->pos = j;
    return type;
}

/* Room for `need` items in *buf; -1 if out of memory. The reading allocates with malloc and sets no exception, so
 * it runs without the GIL (read_pair); the Python entry points raise MemoryError for it (raised_or_nomemory). */
static int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t size) {
    if (need <= *cap) return 0;
    Py_ssize_t cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(*buf, (size_t)cap2 * size);
    if (!p) return -1;
    *buf = p;
    *cap = cap2;
    return 0;
}

static int add_item(Reader *r, int kind, Py_ssize_t source, Py_ssize_t node, Span role, Span atom) {
    if (grow((void **)&r->items, &r->cap_items, r->nitems + 1, sizeof(Item))) return -1;
    Item *it = &r->items[r->nitems++];
    it->kind = kind;
    it->source = source;
    it->node = node;
    it->role = role;
    it->atom = atom;
    return 0;
}

/* The index of the variable written as span, or -1 (span mode). */
static Py_ssize_t find_variable(Reader *r, Lexer *lx, Span span) {
    if (!r->cap_var_slots) return -1;
    uint64_t h = span_hash(lx->data, lx->kind, span.start, span.end, 0);
    Py_ssize_t len = span.end - span.start, mask = r->cap_var_slots - 1;
    for (Py_ssize_t k = (Py_ssize_t)(h & (uint64_t)mask);; k = (k + 1) & mask) {
        struct VarSlot *v = &r->var_slots[k];
        if (v->index < 0) return -1;
        if (v->hash != h || v->end - v->start != len) continue;
        Py_ssize_t i = 0;
        while (i < len && CH(lx, v->start + i) == CH(lx, span.start + i)) i++;
        if (i == len) return v->index;
    }
}

/* Defines a variable in span mode: 1 added, 0 already defined, -1 out of memory. Keeps the table at most half full. */
static int add_variable(Reader *r, Lexer *lx, Span span, Py_ssize_t index) {
    if (find_variable(r, lx, span) >= 0) return 0;
    if (2 * (r->nvars + 1) > r->cap_var_slots) {
        Py_ssize_t cap = r->cap_var_slots ? 2 * r->cap_var_slots : 64;
        struct VarSlot *slots = malloc(sizeof(struct VarSlot) * (size_t)cap);
        if (!slots) return -1;
        for (Py_ssize_t k = 0; k < cap; k++) slots[k].index = -1;
        for (Py_ssize_t k = 0; k < r->cap_var_slots; k++) {
            struct VarSlot *v = &r->var_slots[k];
            if (v->index < 0) continue;
            Py_ssize_t j = (Py_ssize_t)(v->hash & (uint64_t)(cap - 1));
            while (slots[j].index >= 0) j = (j + 1) & (cap - 1);
            slots[j] = *v;
        }
        free(r->var_slots);
        r->var_slots = slots;
        r->cap_var_slots = cap;
    }
    uint64_t h = span_hash(lx->data, lx->kind, span.start, span.end, 0);
    Py_ssize_t k = (Py_ssize_t)(h & (uint64_t)(r->cap_var_slots - 1));
    while (r->var_slots[k].index >= 0) k = (k + 1) & (r->cap_var_slots - 1);
    r->var_slots[k] = (struct VarSlot){h, span.start, span.end, index};
    return 1;
}

/* After '(': var '/' concept; records the node (and the edge from source) and opens it.
 * Returns 1 done, 0 refused, -1 error set or out of memory. */
static int open_node(Reader *r, Lexer *lx, PyObject *text, Py_ssize_t source, Span role) {
    Span var, slash, concept;
    if (next_token(lx, &var) != T_SYM || next_token(lx, &slash) != T_SLASH || next_token(lx, &concept) != T_SYM)
        return 0;
    if (r->max_depth && r->depth >= r->max_depth) return 0;
    Py_ssize_t index = r->nvars;
    if (r->variables) {
        PyObject *name = PyUnicode_Substring(text, var.start, var.end);
        if (!name) return -1;
        int seen = PyDict_Contains(r->defined, name);
        if (seen) { /* a duplicate variable, or an error */
            Py_DECREF(name);
            return seen < 0 ? -1 : 0;
        }
        PyObject *at = PyLong_FromSsize_t(index);
        int failed = !at || PyDict_SetItem(r->defined, name, at) < 0 || PyList_Append(r->variables, name) < 0;
        Py_XDECREF(at);
        Py_DECREF(name);
        if (failed) return -1;
    } else {
        int added = add_variable(r, lx, var, index);
        if (added <= 0) return added; /* a duplicate variable, or an error */
    }
    r->nvars++;
    if (grow((void **)&r->concepts, &r->cap_concepts, index + 1, sizeof(Span)) ||
        grow((void **)&r->stack, &r->cap_stack, r->depth + 1, sizeof(Py_ssize_t)) ||
        add_item(r, IT_NODE, source, index, role, concept))
        return -1;
    r->concepts[index] = concept;
    r->stack[r->depth++] = index;
    return 1;
}

/* First pass: comment lines, then the node structure. Returns 1 read, 0 refused, -1 error set or out of memory. */
static int read_structure(Reader *r, Lexer *lx, PyObject *text) {
    Py_ssize_t i = 0, n = lx->n;
    Span none = {0, 0}, tok, target;
    for (;;) {
        while (i < n && is_space(CH(lx, i))) i++;
        if (i >= n || CH(lx, i) != '#') break;
        Py_ssize_t j = i;
        while (j < n && CH(lx, j) != '\n' && CH(lx, j) != '\r') j++;
        if (grow((void **)&r->comments, &r->cap_comments, r->ncomments + 1, sizeof(Span))) return -1;
        r->comments[r->ncomments].start = i;
        r->comments[r->ncomments++].end = j;
        i = j;
    }
    if (i >= n || CH(lx, i) != '(') return 0;
    lx->pos = i + 1;
    int rc = open_node(r, lx, text, -1, none);
    if (rc <= 0) return rc;
    while (r->depth > 0) {
        int type = next_token(lx, &tok);
        if (type == T_RP) {
            Py_ssize_t node = r->stack[--r->depth];
            if (add_item(r, IT_CLOSE, -1, node, none, none)) return -1;
        } else if (type == T_ROLE) {
            Py_ssize_t source = r->stack[r->depth - 1];
            int ttype = next_token(lx, &target);
            if (ttype == T_LP) {
                rc = open_node(r, lx, text, source, tok);
                if (rc <= 0) return rc;
            } else if (ttype == T_SYM || ttype == T_STR) {
                if (add_item(r, IT_ATOM, source, -1, tok, target)) return -1;
            } else
                return 0;
        } else
            return 0;
    }
    return next_token(lx, &tok) == T_END; /* one graph, nothing after it */
}

/* amrsim.amr.graph._VARIABLE_LIKE: ^[a-z]{1,3}\d*$|^[a-z]+\d+$ (\d is any Unicode decimal digit, as in re). */
static int variable_like(Lexer *lx, Span s) {
    Py_ssize_t i = s.start, letters, digits;
    while (i < s.end && CH(lx, i) >= 'a' && CH(lx, i) <= 'z') i++;
    letters = i - s.start;
    while (i < s.end && Py_UNICODE_ISDECIMAL(CH(lx, i))) i++;
    digits = i - s.start - letters;
    return i == s.end && letters >= 1 && (letters <= 3 || digits >= 1);
}

static int span_equals(Lexer *lx, Span s, const char *word) {
    Py_ssize_t len = (Py_ssize_t)strlen(word);
    if (s.end - s.start != len) return 0;
    for (Py_ssize_t k = 0; k < len; k++)
        if (CH(lx, s.start + k) != (Py_UCS4)(unsigned char)word[k]) return 0;
    return 1;
}

/* A role (with colon) that penman's default model inverts: it ends in -of. */
static int inverted(Lexer *lx, Span role) {
    return role.end - role.start >= 3 && CH(lx, role.end - 3) == '-' && CH(lx, role.end - 2) == 'o' &&
           CH(lx, role.end - 1) == 'f';
}

/* What an atomic target is: the index of the variable it names, AT_CONSTANT, AT_UNDEFINED (looks like a variable
 * but none is defined: the Python path names the error) or AT_ERROR (error set). `atom` is its text (NULL in span
 * mode). */
enum { AT_CONSTANT = -1, AT_UNDEFINED = -2, AT_ERROR = -3 };

static Py_ssize_t atom_target(Reader *r, Lexer *lx, Item *it, PyObject *atom) {
    if (CH(lx, it->atom.start) == '"') return AT_CONSTANT;
    if (!atom) { /* span mode */
        Py_ssize_t index = find_variable(r, lx, it->atom);
        if (index >= 0) return index;
    } else {
        PyObject *at = PyDict_GetItemWithError(r->defined, atom);
        if (at) return PyLong_AsSsize_t(at);
        if (PyErr_Occurred()) return AT_ERROR;
    }
    if (variable_like(lx, it->atom) && !span_equals(lx, it->role, ":mode") && !span_equals(lx, it->role, ":polarity") &&
        !span_equals(lx, it->role, ":li"))
        return AT_UNDEFINED;
    return AT_CONSTANT;
}

/* Appends (a, b, c) to list; steals nothing. */
static int append_triple(PyObject *list, PyObject *a, PyObject *b, PyObject *c) {
    PyObject *t = PyTuple_Pack(3, a, b, c);
    if (!t) return -1;
    int rc = PyList_Append(list, t);
    Py_DECREF(t);
    return rc;
}

/* Appends the triple and a new epidata list holding `marker` (or nothing, if NULL; stolen either way); returns
 * the list (borrowed). */
static PyObject *append_penman(PyObject *triples, PyObject *epis, PyObject *a, PyObject *b, PyObject *c,
                               PyObject *marker) {
    PyObject *list = append_triple(triples, a, b, c) ? NULL : PyList_New(marker ? 1 : 0);
    if (!list) {
        Py_XDECREF(marker);
        return NULL;
    }
    if (marker) PyList_SET_ITEM(list, 0, marker);
    int rc = PyList_Append(epis, list);
    Py_DECREF(list);
    return rc ? NULL : list;
}

/* Second pass: surface edges and (graph) penman's triples and epidata. Returns new tuple, Py_None (refused:
 * an undefined variable), or NULL with an error set. */
static PyObject *build(Reader *r, Lexer *lx, PyObject *text, PyObject *push, PyObject *pop, int graph) {
    PyObject *result = NULL, *variables = NULL, *concepts = NULL, *edges = NULL, *triples = NULL, *epis = NULL;
    PyObject *epidata = NULL, *comments = NULL, *last = NULL;
    PyObject *role = NULL, *role_name = NULL, *role_inv = NULL, *target = NULL, *edge = NULL;
    Py_ssize_t nvars = PyList_GET_SIZE(r->variables);
    variables = PyList_AsTuple(r->variables);
    concepts = PyTuple_New(nvars);
    edges = PyList_New(0);
    if (!variables || !concepts || !edges) goto done;
    for (Py_ssize_t k = 0; k < nvars; k++) {
        PyObject *c = PyUnicode_Substring(text, r->concepts[k].start, r->concepts[k].end);
        if (!c) goto done;
        PyTuple_SET_ITEM(concepts, k, c);
    }
    if (graph && (!(triples = PyList_New(0)) || !(epis = PyList_New(0)))) goto done;
    for (Py_ssize_t k = 0; k < r->nitems; k++) {
        Item *it = &r->items[k];
        if (it->kind == IT_CLOSE) {
            /* penman puts POP on the last triple of a nested node's subtree, the last triple so far */
            if (graph && it->node != 0 && PyList_Append(last, pop)) goto done;
            continue;
        }
        PyObject *source = it->source >= 0 ? PyTuple_GET_ITEM(variables, it->source) : NULL;
        if (source) {
            if (!(role = PyUnicode_Substring(text, it->role.start, it->role.end)) ||
                !(role_name = PyUnicode_Substring(text, it->role.start + 1, it->role.end)))
                goto done;
            if (graph && inverted(lx, it->role) &&
                !(role_inv = PyUnicode_Substring(text, it->role.start, it->role.end - 3)))
                goto done;
        }
        int constant = 0;
        if (it->kind == IT_NODE) {
            target = PyTuple_GET_ITEM(variables, it->node);
            Py_INCREF(target);
        } else {
            PyObject *atom = PyUnicode_Substring(text, it->atom.start, it->atom.end);
            if (!atom) goto done;
            Py_ssize_t node = atom_target(r, lx, it, atom);
            if (node == AT_ERROR) {
                Py_DECREF(atom);
                goto done;
            }
            if (node == AT_UNDEFINED) {
                Py_DECREF(atom); /* "undefined variable": the Python path says so */
                result = Py_None;
                Py_INCREF(result);
                goto done;
            }
            if (node >= 0) {
                PyObject *var = PyList_GET_ITEM(r->variables, node);
                Py_INCREF(var);
                Py_SETREF(atom, var);
            } else
                constant = 1;
            target = atom;
        }
        if (source) {
            if (!(edge = PyTuple_Pack(4, source, role_name, target, constant ? Py_True : Py_False)) ||
                PyList_Append(edges, edge))
                goto done;
            Py_CLEAR(edge);
        }
        if (graph) {
            if (source) {
                PyObject *marker = NULL;
                if (it->kind == IT_NODE && !(marker = PyObject_CallOneArg(push, target))) goto done;
                if (role_inv && !constant)
                    last = append_penman(triples, epis, target, role_inv, source, marker);
                else
                    last = append_penman(triples, epis, source, role, target, marker);
                if (!last) goto done;
            }
            if (it->kind == IT_NODE &&
                !(last = append_penman(triples, epis, target, INSTANCE_ROLE, PyTuple_GET_ITEM(concepts, it->node),
                                       NULL)))
                goto done;
        }
        Py_CLEAR(role);
        Py_CLEAR(role_name);
        Py_CLEAR(role_inv);
        Py_CLEAR(target);
    }
    PyObject *edges_tuple = PyList_AsTuple(edges);
    if (!edges_tuple) goto done;
    Py_SETREF(edges, edges_tuple);
    if (!graph) {
        result = PyTuple_Pack(3, variables, concepts, edges);
        goto done;
    }
    if (!(epidata = PyDict_New()) || !(comments = PyList_New(r->ncomments))) goto done;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(triples); k++) /* the first of duplicated triples keeps its data */
        if (!PyDict_SetDefault(epidata, PyList_GET_ITEM(triples, k), PyList_GET_ITEM(epis, k))) goto done;
    for (Py_ssize_t k = 0; k < r->ncomments; k++) {
        PyObject *c = PyUnicode_Substring(text, r->comments[k].start, r->comments[k].end);
        if (!c) goto done;
        PyList_SET_ITEM(comments, k, c);
    }
    result = PyTuple_Pack(6, variables, concepts, edges, triples, epidata, comments);
done:
    Py_XDECREF(variables);
    Py_XDECREF(concepts);
    Py_XDECREF(edges);
    Py_XDECREF(triples);
    Py_XDECREF(epis);
    Py_XDECREF(epidata);
    Py_XDECREF(comments);
    Py_XDECREF(role);
    Py_XDECREF(role_name);
    Py_XDECREF(role_inv);
    Py_XDECREF(target);
    Py_XDECREF(edge);
    return result;
}

/* A text holding whitespace the two readers split differently (see is_refused): the Python path reads it. */
static int refused_text(Lexer *lx) {
    if (lx->kind == PyUnicode_1BYTE_KIND) {
        const unsigned char *b = (const unsigned char *)lx->data;
        for (Py_ssize_t i = 0; i < lx->n; i++)
            if (b[i] == '\v' || b[i] == '\f' || (b[i] >= 0x1c && b[i] <= 0x1f) || b[i] == 0x85 || b[i] == 0xa0)
                return 1;
        return 0;
    }
    for (Py_ssize_t i = 0; i < lx->n; i++)
        if (is_refused(CH(lx, i))) return 1;
    return 0;
}

/* result, or NULL with the exception raised: the one set, else MemoryError (see grow) */
static PyObject *raised_or_nomemory(PyObject *result) {
    if (!result && !PyErr_Occurred()) PyErr_NoMemory();
    return result;
}

static void free_reader(Reader *r) {
    free(r->items);
    free(r->concepts);
    free(r->stack);
    free(r->comments);
    free(r->var_slots);
    Py_XDECREF(r->variables);
    Py_XDECREF(r->defined);
}

static PyObject *penman_read(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "read(text, push, pop, graph) takes 4 arguments");
        return NULL;
    }
    PyObject *text = args[0];
    int graph = PyLong_Check(args[3]) && PyLong_AsLong(args[3]) == 2 ? 2 : PyObject_IsTrue(args[3]);
    if (graph < 0) return NULL;
    if (!PyUnicode_Check(text)) Py_RETURN_NONE; /* the Python path names the type */
    Lexer lx = {PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), 0};
    if (refused_text(&lx)) Py_RETURN_NONE;
    Reader r;
    memset(&r, 0, sizeof(r));
    r.max_depth = graph ? MAX_DEPTH : 0;
    PyObject *result = NULL;
    if (!(r.variables = PyList_New(0)) || !(r.defined = PyDict_New())) goto done;
    int rc = read_structure(&r, &lx, text);
    if (rc < 0) goto done;
    if (rc == 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = build(&r, &lx, text, args[1], args[2], graph == 1);
done:
    free_reader(&r);
    return raised_or_nomemory(result);
}


/* ---- Smatch triples straight from the surface (amrsim.amr.graph._smatch_triples in C, same rules) ------------- */

static PyObject *S_LOWER, *S_RSTRIP, *S_UNDERSCORE, *S_SPLIT, *S_MOD, *S_DOMAIN, *S_TOP_ROLE, *S_TOP_VALUE,
    *S_INVERSION_EXCEPTIONS;

/* _normalize: lower-cased, trailing '_' removed */
static PyObject *normalize(PyObject *s) {
    PyObject *low = PyObject_CallMethodNoArgs(s, S_LOWER);
    if (!low) return NULL;
    PyObject *out = PyObject_CallMethodOneArg(low, S_RSTRIP, S_UNDERSCORE);
    Py_DECREF(low);
    return out;
}

/* _constant(value, quoted, convention) */
static PyObject *constant(PyObject *value, int quoted, int smatch) {
    if (!quoted) return normalize(value);
    Py_ssize_t n = PyUnicode_GET_LENGTH(value);
    PyObject *content;
    if (n >= 2 && PyUnicode_READ_CHAR(value, 0) == '"' && PyUnicode_READ_CHAR(value, n - 1) == '"')
        content = PyUnicode_Substring(value, 1, n - 1);
    else {
        content = value;
        Py_INCREF(content);
    }
    if (!content) return NULL;
    if (!smatch) {
        PyObject *out = PyObject_CallMethodNoArgs(content, S_LOWER);
        Py_DECREF(content);
        return out;
    }
    /* the reference drops spaces and keeps the first word, then '_' marks the quote */
    PyObject *marked = PyUnicode_Concat(content, S_UNDERSCORE);
    Py_DECREF(content);
    if (!marked) return NULL;
    PyObject *words = PyObject_CallMethodNoArgs(marked, S_SPLIT);
    Py_DECREF(marked);
    if (!words) return NULL;
    PyObject *out = PyList_GET_SIZE(words) ? normalize(PyList_GET_ITEM(words, 0)) : NULL;
    if (!out && !PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "list index out of range");
    Py_DECREF(words);
    return out;
}

/* One edge of the graph as a Smatch triple (amrsim.amr.graph._smatch_triples' rules): an attribute (src, role,
 * value), a relation (src, role, tgt) with an inverted role turned around and cut, or nothing (what the reference
 * loses). Spans point into the text; role_domain: the role is "domain" (a :mod towards a node). */
enum { E_SKIP, E_ATTR, E_REL };
enum { V_PLAIN, V_CONSTANT }; /* an attribute's value: normalised as written, or through constant(value, quoted) */

typedef struct {
    int kind, role_domain, value_form, quoted;
    Py_ssize_t src, tgt;
    Span role, value;
} Edge;

/* The Smatch edges of a read structure, in the order of its items; 1 done, 0 refused (undefined variable), -1 error. */
static int smatch_edges(Reader *r, Lexer *lx, PyObject *text, int smatch, Edge *edges, Py_ssize_t *nedges) {
    Py_ssize_t ne = 0;
    for (Py_ssize_t k = 0; k < r->nitems; k++) {
        Item *it = &r->items[k];
        if (it->kind == IT_CLOSE || it->source < 0) continue;
        Py_ssize_t tgt;
        if (it->kind == IT_NODE)
            tgt = it->node;
        else {
            PyObject *atom = NULL;
            if (r->variables && !(atom = PyUnicode_Substring(text, it->atom.start, it->atom.end))) return -1;
            tgt = atom_target(r, lx, it, atom);
            Py_XDECREF(atom);
            if (tgt == AT_ERROR) return -1;
            if (tgt == AT_UNDEFINED) return 0;
        }
        int is_const = tgt < 0;
        Span name = {it->role.start + 1, it->role.end};
        if (!smatch && !is_const) /* as smatchpp: an even number of -of cancels (:ARG1-of-of is :ARG1), but
                                     :consist-of-of is :consist-of inverted */
            while (name.end - name.start > 6 && inverted(lx, name) && CH(lx, name.end - 6) == '-' &&
                   CH(lx, name.end - 5) == 'o' && CH(lx, name.end - 4) == 'f') {
                Span once = {name.start, name.end - 3};
                if (span_equals(lx, once, "prep-on-behalf-of") || span_equals(lx, once, "prep-out-of") ||
                    span_equals(lx, once, "consist-of"))
                    break;
                name.end -= 6;
            }
        int ends_of = inverted(lx, name) && name.end - name.start >= 3;
        int excepted = ends_of && (span_equals(lx, name, "prep-on-behalf-of") || span_equals(lx, name, "prep-out-of") ||
                                   span_equals(lx, name, "consist-of"));
        int is_mod = span_equals(lx, name, "mod");
        Edge *e = &edges[ne++];
        memset(e, 0, sizeof(*e));
        e->src = it->source;
        e->role = name;
        if (ends_of && !excepted) {
            if (is_const) {
                if (smatch) e->kind = E_SKIP; /* the reference loses it */
                else {
                    e->kind = E_ATTR;
                    e->value = it->atom;
                    e->value_form = V_CONSTANT;
                    e->quoted = 1;
                }
            } else if (!smatch && name.end - name.start == 6 && span_equals(lx, (Span){name.start, name.end - 3}, "mod")) {
                /* :mod-of is :mod turned around, and :mod is domain the other way: (source, domain, target), as
                   from the same graph written with :mod (penman reads both as one graph); smatch 1.0.4 keeps mod */
                e->kind = E_REL;
                e->tgt = tgt;
                e->role_domain = 1;
            } else {
                e->kind = E_REL;
                e->src = tgt;
                e->tgt = it->source;
                e->role.end -= 3;
            }
        } else if (is_mod && !is_const) {
            e->kind = E_REL;
            e->src = tgt;
            e->tgt = it->source;
            e->role_domain = 1;
        } else if (is_mod && smatch)
            e->kind = E_SKIP; /* the reference loses a :mod to a constant */
        else if (is_const) {
            e->kind = E_ATTR;
            e->value = it->atom;
            e->quoted = CH(lx, it->atom.start) == '"';
            e->value_form = e->quoted ? V_CONSTANT : V_PLAIN;
        } else {
            e->kind = E_REL;
            e->tgt = tgt;
        }
    }
    *nedges = ne;
    return 1;
}

static PyObject *edge_role(PyObject *text, const Edge *e) {
    if (e->role_domain) {
        Py_INCREF(S_DOMAIN);
        return S_DOMAIN;
    }
    return PyUnicode_Substring(text, e->role.start, e->role.end);
}

/* An attribute's value as the Smatch triples hold it. */
static PyObject *edge_value(PyObject *text, const Edge *e, int smatch) {
    PyObject *raw = PyUnicode_Substring(text, e->value.start, e->value.end);
    if (!raw || e->value_form == V_PLAIN) {
        PyObject *out = raw ? normalize(raw) : NULL;
        Py_XDECREF(raw);
        return out;
    }
    PyObject *out = constant(raw, e->quoted, smatch);
    Py_DECREF(raw);
    return out;
}

/* Reads the structure of a text for the Smatch paths (graph mode's depth limit when `limited`) and its edges.
 * Returns 1 with r, edges filled (caller frees both), 0 refused (the Python path reads it), -1 error. */
static int read_for_smatch(PyObject *text, Lexer *lx, Reader *r, Edge **edges, Py_ssize_t *nedges, int limited,
                           int smatch, int spans) {
    *edges = NULL;
    memset(r, 0, sizeof(*r));
    if (!PyUnicode_Check(text)) return 0; /* the Python path names the type */
    *lx = (Lexer){PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), 0};
    if (refused_text(lx)) return 0;
    r->max_depth = limited ? MAX_DEPTH : 0;
    if (!spans && (!(r->variables = PyList_New(0)) || !(r->defined = PyDict_New()))) return -1;
    int rc = read_structure(r, lx, text);
    if (rc <= 0) return rc;
    if (r->nvars == 0) return 0;
    if (!(*edges = malloc(sizeof(Edge) * (r->nitems + 1)))) return -1;
    return smatch_edges(r, lx, text, smatch, *edges, nedges);
}

/* (variables, instances, attributes, relations) from the read structure and its edges */
static PyObject *smatch_triples(Reader *r, PyObject *text, const Edge *edges, Py_ssize_t ne, int smatch) {
    PyObject *variables = PyList_AsTuple(r->variables);
    Py_ssize_t nv = PyList_GET_SIZE(r->variables);
    PyObject *result = NULL, *instances = NULL, *attributes = NULL, *relations = NULL, *role = NULL, *value = NULL;
    PyObject *root_concept = NULL;
    if (!variables || !(instances = PyTuple_New(nv)) || !(attributes = PyList_New(0)) ||
        !(relations = PyList_New(0)))
        goto done;
    for (Py_ssize_t k = 0; k < nv; k++) {
        PyObject *raw = PyUnicode_Substring(text, r->concepts[k].start, r->concepts[k].end);
        PyObject *c = raw ? normalize(raw) : NULL;
        Py_XDECREF(raw);
        if (!c) goto done;
        PyObject *pair = PyTuple_Pack(2, PyTuple_GET_ITEM(variables, k), c);
        if (k == 0) {
            root_concept = c;
            Py_INCREF(root_concept);
        }
        Py_DECREF(c);
        if (!pair) goto done;
        PyTuple_SET_ITEM(instances, k, pair);
    }
    if (append_triple(attributes, PyTuple_GET_ITEM(variables, 0), S_TOP_ROLE, smatch ? S_TOP_VALUE : root_concept) < 0)
        goto done;
    for (Py_ssize_t k = 0; k < ne; k++) {
        const Edge *e = &edges[k];
        if (e->kind == E_SKIP) continue;
        if (!(role = edge_role(text, e))) goto done;
        int rc;
        if (e->kind == E_ATTR) {
            if (!(value = edge_value(text, e, smatch))) goto done;
            rc = append_triple(attributes, PyTuple_GET_ITEM(variables, e->src), role, value);
        } else
            rc = append_triple(relations, PyTuple_GET_ITEM(variables, e->src), role, PyTuple_GET_ITEM(variables, e->tgt));
        Py_CLEAR(role);
        Py_CLEAR(value);
        if (rc < 0) goto done;
    }
    PyObject *attrs = PyList_AsTuple(attributes), *rels = attrs ? PyList_AsTuple(relations) : NULL;
    if (rels) result = PyTuple_Pack(4, variables, instances, attrs, rels);
    Py_XDECREF(attrs);
    Py_XDECREF(rels);
done:
    Py_XDECREF(variables);
    Py_XDECREF(instances);
    Py_XDECREF(attributes);
    Py_XDECREF(relations);
    Py_XDECREF(role);
    Py_XDECREF(value);
    Py_XDECREF(root_concept);
    return result;
}

/* read_smatch(text, push, pop, mode, smatch) -> None | (variables, instances, attributes, relations) */
static PyObject *read_smatch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "read_smatch(text, push, pop, mode, smatch) takes 5 arguments");
        return NULL;
    }
    int smatch = PyObject_IsTrue(args[4]);
    if (smatch < 0) return NULL;
    if (PyObject_IsTrue(args[3]) && !(PyLong_Check(args[3]) && PyLong_AsLong(args[3]) == 2)) {
        PyErr_SetString(PyExc_ValueError, "read_smatch: mode is 0 (surface) or 2 (graph mode's limits)");
        return NULL;
    }
    Lexer lx;
    Reader r;
    Edge *edges;
    Py_ssize_t ne = 0;
    PyObject *result = NULL;
    int rc = read_for_smatch(args[0], &lx, &r, &edges, &ne, PyObject_IsTrue(args[3]), smatch, 0);
    if (rc > 0) result = smatch_triples(&r, args[0], edges, ne, smatch);
    else if (rc == 0) result = Py_NewRef(Py_None);
    free(edges);
    free_reader(&r);
    return raised_or_nomemory(result);
}

/* ---- a label table's ids by the label's text as written: read_encoded makes no str for a label seen before ---- */

typedef struct {
    uint64_t hash;
    int32_t id, eq; /* id -1: empty; eq: an attribute value's label ('=' cache) */
    Py_ssize_t off, len; /* the text in the arena */
} LabelSlot;

typedef struct {
    LabelSlot *slots;
    Py_ssize_t cap, used;
    Py_UCS4 *arena;
    Py_ssize_t arena_len, arena_cap;
} LabelCache;

#define LABEL_CACHE "amrsim.amr._penman_reader.LabelCache"

static void label_cache_free(PyObject *capsule) {
    LabelCache *c = PyCapsule_GetPointer(capsule, LABEL_CACHE);
    if (!c) {
        PyErr_Clear();
        return;
    }
    free(c->slots);
    PyMem_Free(c->arena);
    PyMem_Free(c);
}

static PyObject *label_cache_new(PyObject *self, PyObject *unused) {
    LabelCache *c = PyMem_Calloc(1, sizeof(LabelCache));
    if (!c) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(c, LABEL_CACHE, label_cache_free);
    if (!capsule) PyMem_Free(c);
    return capsule;
}

/* The open-addressing table (*slots, *cap) moved into `cap` slots (a power of two); -1 out of memory (no exception:
 * the pair reader runs without the GIL). One table kind for read_encoded's cache and the pair reader's labels. */
static int slots_rehash(LabelSlot **slots, Py_ssize_t *cap, Py_ssize_t new_cap) {
    LabelSlot *moved = malloc(sizeof(LabelSlot) * (size_t)new_cap);
    if (!moved) return -1;
    for (Py_ssize_t k = 0; k < new_cap; k++) moved[k].id = -1;
    for (Py_ssize_t k = 0; k < *cap; k++) {
        if ((*slots)[k].id < 0) continue;
        Py_ssize_t j = (Py_ssize_t)((*slots)[k].hash & (uint64_t)(new_cap - 1));
        while (moved[j].id >= 0) j = (j + 1) & (new_cap - 1);
        moved[j] = (*slots)[k];
    }
    free(*slots);
    *slots = moved;
    *cap = new_cap;
    return 0;
}

static int label_cache_grow(LabelCache *c) {
    if (slots_rehash(&c->slots, &c->cap, c->cap ? 2 * c->cap : 1024) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The id of the label written at span (eq: as an attribute's value) in the table ids, cache (its norm or '=' dict):
 * from the C cache, or on first sight through label_id (which normalises it) and then kept. -1 with an error set. */
static long span_label(LabelCache *c, Lexer *lx, PyObject *text, Span span, int eq, PyObject *ids, PyObject *cache) {
    Py_ssize_t len = span.end - span.start;
    uint64_t h = span_hash(lx->data, lx->kind, span.start, span.end, (uint64_t)eq + 1);
    if (c->cap) {
        Py_ssize_t mask = c->cap - 1;
        for (Py_ssize_t k = (Py_ssize_t)(h & (uint64_t)mask);; k = (k + 1) & mask) {
            LabelSlot *slot = &c->slots[k];
            if (slot->id < 0) break;
            if (slot->hash != h || slot->eq != eq || slot->len != len) continue;
            const Py_UCS4 *key = c->arena + slot->off;
            Py_ssize_t i = 0;
            while (i < len && key[i] == CH(lx, span.start + i)) i++;
            if (i == len) return slot->id;
        }
    }
    PyObject *raw = PyUnicode_Substring(text, span.start, span.end);
    if (!raw) return -1;
    long id = label_id(ids, cache, raw, eq);
    Py_DECREF(raw);
    if (id < 0) return -1;
    if ((2 * (c->used + 1) > c->cap && label_cache_grow(c) < 0) ||
        grow((void **)&c->arena, &c->arena_cap, c->arena_len + len, sizeof(Py_UCS4)))
        return -1;
    for (Py_ssize_t i = 0; i < len; i++) c->arena[c->arena_len + i] = CH(lx, span.start + i);
    Py_ssize_t k = (Py_ssize_t)(h & (uint64_t)(c->cap - 1));
    while (c->slots[k].id >= 0) k = (k + 1) & (c->cap - 1);
    c->slots[k] = (LabelSlot){h, (int32_t)id, eq, c->arena_len, len};
    c->arena_len += len;
    c->used++;
    return id;
}

/* read_encoded(text, smatch, ids, norm_cache, eq_cache, label_cache) -> None | (encoding, triples, nodes): the graph's
 * Smatch triples (graph mode's limits) straight into _smatch_core.encode's bytes, with the same label table and the
 * same label ids in the same order as encode(ids, norm_cache, eq_cache, *read_smatch(text, ..., 2, smatch)).
 * label_cache: label_cache()'s, kept with that one table (its ids are the table's). */
static PyObject *read_encoded(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "read_encoded(text, smatch, ids, norm_cache, eq_cache, label_cache) takes 6 arguments");
        return NULL;
    }
    int smatch = PyObject_IsTrue(args[1]);
    if (smatch < 0) return NULL;
    PyObject *ids = args[2], *norm = args[3], *eq = args[4], *text = args[0];
    if (!PyDict_Check(ids) || !PyDict_Check(norm) || !PyDict_Check(eq)) {
        PyErr_SetString(PyExc_TypeError, "read_encoded: ids and caches must be dicts");
        return NULL;
    }
    LabelCache *spans = PyCapsule_GetPointer(args[5], LABEL_CACHE);
    if (!spans) return NULL;
    Lexer lx;
    Reader r;
    Edge *edges;
    Py_ssize_t ne = 0;
    PyObject *result = NULL, *encoding = NULL;
    Raw4 *un = NULL, *bi = NULL;
    int32_t *concept = NULL;
    int rc = read_for_smatch(text, &lx, &r, &edges, &ne, 1, smatch, 1);
    if (rc <= 0) {
        if (rc == 0) result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t n = r.nvars, nu = 0, nb = 0, triples = n + 1;
    un = PyMem_Malloc(sizeof(Raw4) * (n + ne + 1));
    bi = PyMem_Malloc(sizeof(Raw4) * (ne + 1));
    concept = PyMem_Malloc(sizeof(int32_t) * (n + 1));
    if (!un || !bi || !concept) {
        PyErr_NoMemory();
        goto done;
    }
    /* label ids in encode's order: the two kinds, every instance, every attribute (role, then value), relations */
    long kind_i = label_id(ids, norm, STR_I, 0), kind_s = label_id(ids, norm, STR_S, 0);
    if (kind_i < 0 || kind_s < 0) goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        long c = span_label(spans, &lx, text, r.concepts[k], 0, ids, norm);
        if (c < 0) goto done;
        concept[k] = (int32_t)c;
        un[nu++] = (Raw4){(int32_t)kind_i, (int32_t)c, (int32_t)k, 0};
    }
    long top = label_id(ids, norm, S_TOP_ROLE, 0), top_value;
    if (top < 0) goto done;
    if (smatch)
        top_value = label_id(ids, eq, S_TOP_VALUE, 1);
    else
        top_value = span_label(spans, &lx, text, r.concepts[0], 1, ids, eq);
    if (top_value < 0) goto done;
    un[nu++] = (Raw4){(int32_t)top, (int32_t)top_value, 0, 0};
    for (Py_ssize_t k = 0; k < ne; k++) {
        const Edge *e = &edges[k];
        if (e->kind != E_ATTR) continue;
        long rid = span_label(spans, &lx, text, e->role, 0, ids, norm), vid = -1;
        if (rid < 0) goto done;
        if (e->value_form == V_PLAIN) /* as written: label_id normalises it as edge_value would */
            vid = span_label(spans, &lx, text, e->value, 1, ids, eq);
        else {
            PyObject *value = edge_value(text, e, smatch);
            vid = value ? label_id(ids, eq, value, 1) : -1;
            Py_XDECREF(value);
        }
        if (vid < 0) goto done;
        un[nu++] = (Raw4){(int32_t)rid, (int32_t)vid, (int32_t)e->src, 0};
        triples++;
    }
    for (Py_ssize_t k = 0; k < ne; k++) {
        const Edge *e = &edges[k];
        if (e->kind != E_REL) continue;
        long rid = e->role_domain ? label_id(ids, norm, S_DOMAIN, 0) : span_label(spans, &lx, text, e->role, 0, ids, norm);
        if (rid < 0) goto done;
        if (e->src == e->tgt)
            un[nu++] = (Raw4){(int32_t)kind_s, (int32_t)rid, (int32_t)e->src, 0};
        else {
            bi[nb] = (Raw4){(int32_t)e->src, (int32_t)e->tgt, (int32_t)rid, (int32_t)nb};
            nb++;
        }
        triples++;
    }
    if ((encoding = pack_encoding(n, un, nu, bi, nb, concept, concept[0])))
        result = Py_BuildValue("Nnn", encoding, triples, n);
done:
    PyMem_Free(un);
    PyMem_Free(bi);
    PyMem_Free(concept);
    free(edges);
    free_reader(&r);
    return raised_or_nomemory(result);
}

/* ---- pairs read and encoded without the GIL (read_pair, for _smatch_core.align_texts) ----------------------------
 * The same rules and label normalisation as read_encoded, on ASCII texts only (str.lower and str.split are ASCII
 * there), each pair with a label table of its own: ids in order of first sight, as a fresh table gives them. */

typedef struct {
    LabelSlot *slots; /* eq unused: the '=' is part of a value's key */
    Py_ssize_t cap, used;
    char *arena;
    Py_ssize_t len, cap_arena;
} PairLabels;

typedef struct {
    Reader r;
    Edge *edges;
    Raw4 *un, *bi;
    int32_t *concept, *counts, *out[2];
    int64_t *roles;
    Py_ssize_t cap_edges, cap_un, cap_bi, cap_concept, cap_counts, cap_roles, cap_out[2];
    PairLabels labels;
} PairScratch;

static int is_ascii_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

/* The id of the key just written at the arena's end (kept if new, dropped if known); -1 out of memory. */
static int32_t key_id(PairLabels *t, Py_ssize_t off, Py_ssize_t len) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < len; i++) h = (h ^ (unsigned char)t->arena[off + i]) * 1099511628211ULL;
    if (2 * (t->used + 1) > t->cap && slots_rehash(&t->slots, &t->cap, t->cap ? 2 * t->cap : 256) < 0) return -1;
    Py_ssize_t mask = t->cap - 1, k = (Py_ssize_t)(h & (uint64_t)mask);
    for (;; k = (k + 1) & mask) {
        LabelSlot *slot = &t->slots[k];
        if (slot->id < 0) break;
        if (slot->hash == h && slot->len == len && !memcmp(t->arena + slot->off, t->arena + off, (size_t)len))
            return slot->id;
    }
    t->slots[k] = (LabelSlot){h, (int32_t)t->used, 0, off, len};
    t->len = off + len;
    return (int32_t)t->used++;
}

/* The id of s[start:end] normalised as label_id does: lower-cased, trailing '_' removed, '=' before it when eq. */
static int32_t pair_label(PairLabels *t, const char *s, Py_ssize_t start, Py_ssize_t end, int eq) {
    Py_ssize_t off = t->len, k = 0;
    if (grow((void **)&t->arena, &t->cap_arena, off + (end - start) + 1, 1)) return -1;
    char *o = t->arena + off;
    if (eq) o[k++] = '=';
    Py_ssize_t body = k;
    for (Py_ssize_t i = start; i < end; i++) o[k++] = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] + 32) : s[i];
    while (k > body && o[k - 1] == '_') k--;
    return key_id(t, off, k);
}

static int32_t word_label(PairLabels *t, const char *word, int eq) {
    return pair_label(t, word, 0, (Py_ssize_t)strlen(word), eq);
}

/* An attribute value read through edge_value's constant(): the quotes' content, lower-cased (under the smatch
 * convention its first word, as the reference's split), then normalised again by label_id, '=' before it. */
static int32_t constant_label(PairLabels *t, const char *s, Span v, int smatch) {
    Py_ssize_t start = v.start, end = v.end;
    if (end - start >= 2 && s[start] == '"' && s[end - 1] == '"') {
        start++;
        end--;
    }
    if (smatch) { /* (content + '_').split()[0]: the first word, or '_' (empty once normalised) */
        while (start < end && is_ascii_space(s[start])) start++;
        Py_ssize_t stop = start;
        while (stop < end && !is_ascii_space(s[stop])) stop++;
        end = stop;
    }
    return pair_label(t, s, start, end, 1);
}

static int grow_scratch(PairScratch *sc, Py_ssize_t n, Py_ssize_t ne) {
    return grow((void **)&sc->un, &sc->cap_un, n + ne + 1, sizeof(Raw4)) ||
                   grow((void **)&sc->bi, &sc->cap_bi, ne + 1, sizeof(Raw4)) ||
                   grow((void **)&sc->concept, &sc->cap_concept, n + 1, sizeof(int32_t)) ||
                   grow((void **)&sc->counts, &sc->cap_counts, ne + 1, sizeof(int32_t)) ||
                   grow((void **)&sc->roles, &sc->cap_roles, ne + 1, sizeof(int64_t))
               ? -1
               : 0;
}

/* One graph (ASCII text) encoded into sc->out[which] with sc->labels, as read_encoded encodes it (the labels met in
 * the same order): 1 done, 0 refused, -1 out of memory. */
static int encode_ascii(PairScratch *sc, int which, const char *s, Py_ssize_t len, int smatch, int32_t *triples) {
    Lexer lx = {PyUnicode_1BYTE_KIND, s, len, 0};
    if (refused_text(&lx)) return 0;
    Reader *r = &sc->r;
    r->nitems = r->depth = r->ncomments = r->nvars = 0;
    r->max_depth = MAX_DEPTH;
    for (Py_ssize_t k = 0; k < r->cap_var_slots; k++) r->var_slots[k].index = -1;
    int rc = read_structure(r, &lx, NULL);
    if (rc <= 0 || r->nvars == 0) return rc < 0 ? -1 : 0;
    Py_ssize_t n = r->nvars, ne = 0, nu = 0, nb = 0;
    if (grow((void **)&sc->edges, &sc->cap_edges, r->nitems + 1, sizeof(Edge))) return -1;
    if ((rc = smatch_edges(r, &lx, NULL, smatch, sc->edges, &ne)) <= 0) return rc;
    if (grow_scratch(sc, n, ne)) return -1;
    PairLabels *t = &sc->labels;
    Raw4 *un = sc->un, *bi = sc->bi;
    int32_t kind_i = word_label(t, "i", 0), kind_s = word_label(t, "s", 0);
    if (kind_i < 0 || kind_s < 0) return -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        int32_t c = pair_label(t, s, r->concepts[k].start, r->concepts[k].end, 0);
        if (c < 0) return -1;
        sc->concept[k] = c;
        un[nu++] = (Raw4){kind_i, c, (int32_t)k, 0};
    }
    int32_t top = word_label(t, "TOP", 0);
    int32_t top_value = smatch ? word_label(t, "top", 1) : pair_label(t, s, r->concepts[0].start, r->concepts[0].end, 1);
    if (top < 0 || top_value < 0) return -1;
    un[nu++] = (Raw4){top, top_value, 0, 0};
    *triples = (int32_t)n + 1;
    for (Py_ssize_t k = 0; k < ne; k++) {
        const Edge *e = &sc->edges[k];
        if (e->kind != E_ATTR) continue;
        int32_t rid = pair_label(t, s, e->role.start, e->role.end, 0);
        if (rid < 0) return -1;
        int32_t vid = e->value_form == V_PLAIN ? pair_label(t, s, e->value.start, e->value.end, 1)
                                               : constant_label(t, s, e->value, smatch);
        if (vid < 0) return -1;
        un[nu++] = (Raw4){rid, vid, (int32_t)e->src, 0};
        ++*triples;
    }
    for (Py_ssize_t k = 0; k < ne; k++) {
        const Edge *e = &sc->edges[k];
        if (e->kind != E_REL) continue;
        int32_t rid = e->role_domain ? word_label(t, "domain", 0) : pair_label(t, s, e->role.start, e->role.end, 0);
        if (rid < 0) return -1;
        if (e->src == e->tgt)
            un[nu++] = (Raw4){kind_s, rid, (int32_t)e->src, 0};
        else {
            bi[nb] = (Raw4){(int32_t)e->src, (int32_t)e->tgt, rid, (int32_t)nb};
            nb++;
        }
        ++*triples;
    }
    Py_ssize_t size = merge_features(n, un, &nu, bi, &nb, sc->counts);
    if (grow((void **)&sc->out[which], &sc->cap_out[which], size, sizeof(int32_t))) return -1;
    write_encoding(sc->out[which], n, un, nu, bi, nb, sc->counts, sc->concept, sc->concept[0], sc->roles);
    return 1;
}

/* PairReader.read_pair (see _smatch_encoding.h). No Python API. */
static int read_pair(void *scratch, const char *text1, Py_ssize_t n1, const char *text2, Py_ssize_t n2, int smatch,
                     const int32_t *out[2], int32_t triples[2]) {
    PairScratch *sc = scratch;
    PairLabels *t = &sc->labels;
    t->used = t->len = 0;
    for (Py_ssize_t k = 0; k < t->cap; k++) t->slots[k].id = -1;
    int rc = encode_ascii(sc, 0, text1, n1, smatch, &triples[0]);
    if (rc > 0) rc = encode_ascii(sc, 1, text2, n2, smatch, &triples[1]);
    out[0] = sc->out[0];
    out[1] = sc->out[1];
    return rc;
}

static void *scratch_new(void) { return calloc(1, sizeof(PairScratch)); }

static void scratch_free(void *scratch) {
    PairScratch *sc = scratch;
    if (!sc) return;
    free_reader(&sc->r);
    free(sc->edges); free(sc->un); free(sc->bi); free(sc->concept); free(sc->counts); free(sc->roles);
    free(sc->out[0]); free(sc->out[1]); free(sc->labels.slots); free(sc->labels.arena);
    free(sc);
}

static PairReader pair_reader = {scratch_new, scratch_free, read_pair};

/* encode_pair(text1, text2, smatch) -> None | (encoding 1, triples 1, encoding 2, triples 2): what align_texts
 * aligns, for tests (None: the pair goes to the Python path). */
static PyObject *encode_pair(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "encode_pair(text1, text2, smatch) takes 3 arguments");
        return NULL;
    }
    int smatch = PyObject_IsTrue(args[2]);
    if (smatch < 0) return NULL;
    for (int k = 0; k < 2; k++)
        if (!PyUnicode_Check(args[k]) || !PyUnicode_IS_ASCII(args[k])) Py_RETURN_NONE;
    PairScratch *sc = scratch_new();
    if (!sc) return PyErr_NoMemory();
    const int32_t *out[2];
    int32_t triples[2];
    PyObject *result = NULL;
    int rc = read_pair(sc, PyUnicode_DATA(args[0]), PyUnicode_GET_LENGTH(args[0]), PyUnicode_DATA(args[1]),
                       PyUnicode_GET_LENGTH(args[1]), smatch, out, triples);
    if (rc == 0) result = Py_NewRef(Py_None);
    else if (rc > 0) {
        Py_ssize_t size[2];
        for (int k = 0; k < 2; k++) size[k] = H_LEN + 4 * out[k][H_NU] + 5 * out[k][H_NB] + out[k][H_N];
        result = Py_BuildValue("y#iy#i", (const char *)out[0], size[0] * (Py_ssize_t)sizeof(int32_t), triples[0],
                               (const char *)out[1], size[1] * (Py_ssize_t)sizeof(int32_t), triples[1]);
    }
    scratch_free(sc);
    return raised_or_nomemory(result);
}

static PyMethodDef methods[] = {
    {"read", (PyCFunction)(void (*)(void))penman_read, METH_FASTCALL,
     "read(text, push, pop, graph) -> None (use the Python path) or the graph's surface [and penman triples]."},
    {"read_encoded", (PyCFunction)(void (*)(void))read_encoded, METH_FASTCALL,
     "read_encoded(text, smatch, ids, norm_cache, eq_cache, label_cache) -> None (use the Python path) or (encoding, "
     "triples, nodes): the graph's Smatch triples encoded as _smatch_core.encode does, without building them."},
    {"label_cache", label_cache_new, METH_NOARGS,
     "label_cache() -> a new cache of label ids by the labels' text, for read_encoded with one label table."},
    {"encode_pair", (PyCFunction)(void (*)(void))encode_pair, METH_FASTCALL,
     "encode_pair(text1, text2, smatch) -> None (the Python path reads the pair) or (encoding 1, triples 1, encoding "
     "2, triples 2): the encodings _smatch_core.align_texts aligns, with a label table of the pair's own."},
    {"read_smatch", (PyCFunction)(void (*)(void))read_smatch, METH_FASTCALL,
     "read_smatch(text, push, pop, mode, smatch) -> None (use the Python path) or the graph's Smatch triples "
     "(variables, instances, attributes, relations) under the smatch (true) or amr convention; mode as read's."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_penman_reader", "PENMAN reading in C.", -1, methods};

PyMODINIT_FUNC PyInit__penman_reader(void) {
    INSTANCE_ROLE = PyUnicode_InternFromString(":instance");
    if (!INSTANCE_ROLE || encoding_init() < 0) return NULL;
    if (!(S_LOWER = PyUnicode_InternFromString("lower")) || !(S_RSTRIP = PyUnicode_InternFromString("rstrip")) ||
        !(S_UNDERSCORE = PyUnicode_InternFromString("_")) || !(S_SPLIT = PyUnicode_InternFromString("split")) ||
        !(S_MOD = PyUnicode_InternFromString("mod")) || !(S_DOMAIN = PyUnicode_InternFromString("domain")) ||
        !(S_TOP_ROLE = PyUnicode_InternFromString("TOP")) || !(S_TOP_VALUE = PyUnicode_InternFromString("top")))
        return NULL;
    PyObject *exceptions = Py_BuildValue("(sss)", "prep-on-behalf-of", "prep-out-of", "consist-of");
    if (!exceptions || !(S_INVERSION_EXCEPTIONS = PyFrozenSet_New(exceptions))) {
        Py_XDECREF(exceptions);
        return NULL;
    }
    Py_DECREF(exceptions);
    PyObject *m = PyModule_Create(&module), *capsule = m ? PyCapsule_New(&pair_reader, PAIR_READER_CAPSULE, NULL) : NULL;
    if (!capsule || PyModule_AddObject(m, "_pair_reader", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_XDECREF(m);
        return NULL;
    }
    return m;
}
