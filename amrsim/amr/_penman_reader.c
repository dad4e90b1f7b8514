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
 * Handled: '#' lines before the graph, then one graph of nodes '(' var '/' concept (role target)* ')', targets a
 * node, a symbol or a "string" without backslash or line break. Anything else returns None, so the Python path
 * produces its result or its exact error: whitespace other than space/tab/CR/LF, '~'
 * (alignments), '#' or '\' outside comments and strings, a symbol or role running into ':', a string concept or
 * variable, duplicate or undefined variables, content after the graph, and (graph mode) nesting deeper than
 * MAX_DEPTH, where penman's recursive parser may run out of stack. No recursion here, so any depth is safe.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

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
    PyObject *variables; /* list of str, in order of definition */
    PyObject *defined;   /* dict: variable -> the same str object */
} Reader;

static PyObject *INSTANCE_ROLE; /* ":instance" */

#define CH(lx, i) PyUnicode_READ((lx)->kind, (lx)->data, (i))

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

static int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t size) {
    if (need <= *cap) return 0;
    Py_ssize_t cap2 = *cap ? *cap : 16;
    while (cap2 < need) cap2 *= 2;
    void *p = PyMem_Realloc(*buf, (size_t)cap2 * size);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
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

/* After '(': var '/' concept; records the node (and the edge from source) and opens it.
 * Returns 1 done, 0 refused, -1 error set. */
static int open_node(Reader *r, Lexer *lx, PyObject *text, Py_ssize_t source, Span role) {
    Span var, slash, concept;
    if (next_token(lx, &var) != T_SYM || next_token(lx, &slash) != T_SLASH || next_token(lx, &concept) != T_SYM)
        return 0;
    if (r->max_depth && r->depth >= r->max_depth) return 0;
    PyObject *name = PyUnicode_Substring(text, var.start, var.end);
    if (!name) return -1;
    int seen = PyDict_Contains(r->defined, name);
    if (seen) { /* a duplicate variable, or an error */
        Py_DECREF(name);
        return seen < 0 ? -1 : 0;
    }
    int failed = PyDict_SetItem(r->defined, name, name) < 0 || PyList_Append(r->variables, name) < 0;
    Py_DECREF(name);
    if (failed) return -1;
    Py_ssize_t index = PyList_GET_SIZE(r->variables) - 1;
    if (grow((void **)&r->concepts, &r->cap_concepts, index + 1, sizeof(Span)) ||
        grow((void **)&r->stack, &r->cap_stack, r->depth + 1, sizeof(Py_ssize_t)) ||
        add_item(r, IT_NODE, source, index, role, concept))
        return -1;
    r->concepts[index] = concept;
    r->stack[r->depth++] = index;
    return 1;
}

/* First pass: comment lines, then the node structure. Returns 1 read, 0 refused, -1 error set. */
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
            if (CH(lx, it->atom.start) == '"')
                constant = 1;
            else {
                PyObject *var = PyDict_GetItemWithError(r->defined, atom);
                if (var) {
                    Py_INCREF(var);
                    Py_SETREF(atom, var);
                } else if (PyErr_Occurred()) {
                    Py_DECREF(atom);
                    goto done;
                } else if (variable_like(lx, it->atom) && !span_equals(lx, it->role, ":mode") &&
                           !span_equals(lx, it->role, ":polarity") && !span_equals(lx, it->role, ":li")) {
                    Py_DECREF(atom); /* "undefined variable": the Python path says so */
                    result = Py_None;
                    Py_INCREF(result);
                    goto done;
                } else
                    constant = 1;
            }
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
    if (PyUnicode_IS_ASCII(text)) {
        const unsigned char *b = (const unsigned char *)lx.data;
        for (Py_ssize_t i = 0; i < lx.n; i++)
            if (b[i] == '\v' || b[i] == '\f' || (b[i] >= 0x1c && b[i] <= 0x1f)) Py_RETURN_NONE;
    } else {
        for (Py_ssize_t i = 0; i < lx.n; i++)
            if (is_refused(CH(&lx, i))) Py_RETURN_NONE;
    }
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
    PyMem_Free(r.items);
    PyMem_Free(r.concepts);
    PyMem_Free(r.stack);
    PyMem_Free(r.comments);
    Py_XDECREF(r.variables);
    Py_XDECREF(r.defined);
    return result;
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

static int append3(PyObject *list, PyObject *a, PyObject *b, PyObject *c) {
    PyObject *t = PyTuple_Pack(3, a, b, c);
    if (!t) return -1;
    int rc = PyList_Append(list, t);
    Py_DECREF(t);
    return rc;
}

/* (variables, instances, attributes, relations) of a surface (variables, concepts, edges) */
static PyObject *smatch_from_surface(PyObject *surface, int smatch) {
    PyObject *variables = PyTuple_GET_ITEM(surface, 0), *concepts = PyTuple_GET_ITEM(surface, 1);
    PyObject *edges = PyTuple_GET_ITEM(surface, 2);
    Py_ssize_t nv = PyTuple_GET_SIZE(variables), ne = PyTuple_GET_SIZE(edges);
    if (nv == 0) Py_RETURN_NONE; /* the Python path names the problem */
    PyObject *result = NULL, *instances = NULL, *attributes = NULL, *relations = NULL, *value = NULL;
    PyObject *root_concept = NULL;
    if (!(instances = PyTuple_New(nv)) || !(attributes = PyList_New(0)) || !(relations = PyList_New(0))) goto done;
    for (Py_ssize_t k = 0; k < nv; k++) {
        PyObject *c = normalize(PyTuple_GET_ITEM(concepts, k));
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
    if (append3(attributes, PyTuple_GET_ITEM(variables, 0), S_TOP_ROLE, smatch ? S_TOP_VALUE : root_concept) < 0)
        goto done;
    for (Py_ssize_t k = 0; k < ne; k++) {
        PyObject *edge = PyTuple_GET_ITEM(edges, k);
        PyObject *src = PyTuple_GET_ITEM(edge, 0), *role = PyTuple_GET_ITEM(edge, 1);
        PyObject *tgt = PyTuple_GET_ITEM(edge, 2);
        int is_const = PyTuple_GET_ITEM(edge, 3) == Py_True;
        Py_ssize_t rn = PyUnicode_GET_LENGTH(role);
        int ends_of = rn >= 3 && PyUnicode_READ_CHAR(role, rn - 3) == '-' && PyUnicode_READ_CHAR(role, rn - 2) == 'o' &&
                      PyUnicode_READ_CHAR(role, rn - 1) == 'f';
        int excepted = ends_of ? PySet_Contains(S_INVERSION_EXCEPTIONS, role) : 0;
        if (excepted < 0) goto done;
        int is_mod = PyUnicode_CompareWithASCIIString(role, "mod") == 0;
        int rc;
        if (ends_of && !excepted) {
            if (is_const) {
                if (smatch) continue; /* the reference loses it */
                if (!(value = constant(tgt, 1, smatch))) goto done;
                rc = append3(attributes, src, role, value);
            } else {
                if (!(value = PyUnicode_Substring(role, 0, rn - 3))) goto done;
                rc = append3(relations, tgt, value, src);
            }
        } else if (is_mod && !is_const) {
            rc = append3(relations, tgt, S_DOMAIN, src);
        } else if (is_mod && smatch) {
            continue; /* the reference loses a :mod to a constant */
        } else if (is_const) {
            int quoted = PyUnicode_GET_LENGTH(tgt) > 0 && PyUnicode_READ_CHAR(tgt, 0) == '"';
            if (!(value = constant(tgt, quoted, smatch))) goto done;
            rc = append3(attributes, src, role, value);
        } else
            rc = append3(relations, src, role, tgt);
        Py_CLEAR(value);
        if (rc < 0) goto done;
    }
    PyObject *attrs = PyList_AsTuple(attributes), *rels = attrs ? PyList_AsTuple(relations) : NULL;
    if (rels) result = PyTuple_Pack(4, variables, instances, attrs, rels);
    Py_XDECREF(attrs);
    Py_XDECREF(rels);
done:
    Py_XDECREF(instances);
    Py_XDECREF(attributes);
    Py_XDECREF(relations);
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
    PyObject *surface = penman_read(self, args, 4);
    if (!surface || surface == Py_None) return surface;
    PyObject *result = smatch_from_surface(surface, smatch);
    Py_DECREF(surface);
    return result;
}

static PyMethodDef methods[] = {
    {"read", (PyCFunction)(void (*)(void))penman_read, METH_FASTCALL,
     "read(text, push, pop, graph) -> None (use the Python path) or the graph's surface [and penman triples]."},
    {"read_smatch", (PyCFunction)(void (*)(void))read_smatch, METH_FASTCALL,
     "read_smatch(text, push, pop, mode, smatch) -> None (use the Python path) or the graph's Smatch triples "
     "(variables, instances, attributes, relations) under the smatch (true) or amr convention; mode as read's."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_penman_reader", "PENMAN reading in C.", -1, methods};

PyMODINIT_FUNC PyInit__penman_reader(void) {
    INSTANCE_ROLE = PyUnicode_InternFromString(":instance");
    if (!INSTANCE_ROLE) return NULL;
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
    return PyModule_Create(&module);
}
