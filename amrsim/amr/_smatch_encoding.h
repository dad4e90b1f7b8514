/* One graph's Smatch encoding (the layout `encode` in _smatch_core.c documents): label ids and packing, shared by
 * _smatch_core.encode (from triples) and _penman_reader.read_encoded (straight from PENMAN text), so both give the
 * same bytes for the same graph and label table. Each module that includes this calls encoding_init() once. */
#ifndef AMRSIM_SMATCH_ENCODING_H
#define AMRSIM_SMATCH_ENCODING_H
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define H_N 0
#define H_NU 1
#define H_NB 2
#define H_FIRST 3
#define H_LEN 4

static PyObject *STR_I, *STR_S, *STR_EQ, *STR_LOWER, *STR_RSTRIP, *STR_UNDERSCORE;

static int encoding_init(void) {
    return (STR_I = PyUnicode_InternFromString("i")) && (STR_S = PyUnicode_InternFromString("s")) &&
                   (STR_EQ = PyUnicode_InternFromString("=")) && (STR_LOWER = PyUnicode_InternFromString("lower")) &&
                   (STR_RSTRIP = PyUnicode_InternFromString("rstrip")) &&
                   (STR_UNDERSCORE = PyUnicode_InternFromString("_"))
               ? 0
               : -1;
}

/* id of a raw label (normalised, '=' prepended when eq) in ids; -1 with an error set */
static long label_id(PyObject *ids, PyObject *cache, PyObject *raw, int eq) {
    PyObject *v = PyDict_GetItemWithError(cache, raw);
    if (v) return PyLong_AsLong(v);
    if (PyErr_Occurred()) return -1;
    if (!PyUnicode_Check(raw)) {
        PyErr_Format(PyExc_TypeError, "encode: a label must be str, not %.100s", Py_TYPE(raw)->tp_name);
        return -1;
    }
    PyObject *low = PyObject_CallMethodNoArgs(raw, STR_LOWER);
    if (!low) return -1;
    PyObject *norm = PyObject_CallMethodOneArg(low, STR_RSTRIP, STR_UNDERSCORE);
    Py_DECREF(low);
    if (!norm) return -1;
    if (eq) {
        PyObject *with = PyUnicode_Concat(STR_EQ, norm);
        Py_DECREF(norm);
        if (!(norm = with)) return -1;
    }
    long id;
    PyObject *known = PyDict_GetItemWithError(ids, norm);
    if (known) {
        Py_INCREF(known);
    } else if (PyErr_Occurred() || !(known = PyLong_FromSsize_t(PyDict_GET_SIZE(ids))) ||
               PyDict_SetItem(ids, norm, known) < 0) {
        Py_XDECREF(known);
        Py_DECREF(norm);
        return -1;
    }
    Py_DECREF(norm);
    id = PyLong_AsLong(known);
    if (PyDict_SetItem(cache, raw, known) < 0) id = -1;
    Py_DECREF(known);
    return id;
}

typedef struct { int32_t a, b, c, pos; } Raw4;

static int cmp_unary(const void *x, const void *y) { /* (kind, label, node) */
    const Raw4 *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    if (p->b != q->b) return p->b < q->b ? -1 : 1;
    return (p->c > q->c) - (p->c < q->c);
}
static int cmp_binary(const void *x, const void *y) { /* (node, node, role, first position) */
    const Raw4 *p = x, *q = y;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    if (p->b != q->b) return p->b < q->b ? -1 : 1;
    if (p->c != q->c) return p->c < q->c ? -1 : 1;
    return (p->pos > q->pos) - (p->pos < q->pos);
}
static int cmp_pos(const void *x, const void *y) {
    const Raw4 *p = x, *q = y;
    return (p->pos > q->pos) - (p->pos < q->pos);
}
static int cmp_int64(const void *x, const void *y) {
    int64_t p = *(const int64_t *)x, q = *(const int64_t *)y;
    return (p > q) - (p < q);
}

/* A graph's raw features sorted and merged in place (their .pos fields are scratch): un: (kind or role, label,
 * node) unary features; bi: (node, node, role, k) relations, k their order. Equal unary features merge (sorted),
 * equal relations merge in order of first occurrence; counts (nb + 1 ints) gets each kept relation's count by its
 * k. Returns the encoding's length in int32s for n nodes. No Python API: the reader runs it without the GIL. */
static Py_ssize_t merge_features(Py_ssize_t n, Raw4 *un, Py_ssize_t *nu, Raw4 *bi, Py_ssize_t *nb, int32_t *counts) {
    qsort(un, *nu, sizeof(Raw4), cmp_unary);
    Py_ssize_t mu = 0;
    for (Py_ssize_t k = 0; k < *nu; k++) {
        if (mu && !cmp_unary(&un[mu - 1], &un[k])) un[mu - 1].pos++;
        else { un[mu] = un[k]; un[mu].pos = 1; mu++; }
    }
    qsort(bi, *nb, sizeof(Raw4), cmp_binary);
    Py_ssize_t mb = 0;
    for (Py_ssize_t k = 0; k < *nb; k++) {
        if (mb && bi[mb - 1].a == bi[k].a && bi[mb - 1].b == bi[k].b && bi[mb - 1].c == bi[k].c)
            counts[bi[mb - 1].pos]++;
        else { bi[mb] = bi[k]; counts[bi[k].pos] = 1; mb++; }
    }
    qsort(bi, mb, sizeof(Raw4), cmp_pos);
    *nu = mu;
    *nb = mb;
    return H_LEN + 4 * mu + 4 * mb + mb + n;
}

/* Writes merged features (merge_features) as the encoding into o; roles: mb int64s of scratch. concept: each node's
 * concept id or -1; first: the first instance's concept or -1. No Python API. */
static void write_encoding(int32_t *o, Py_ssize_t n, const Raw4 *un, Py_ssize_t mu, const Raw4 *bi, Py_ssize_t mb,
                           const int32_t *counts, const int32_t *concept, int32_t first, int64_t *roles) {
    o[H_N] = (int32_t)n; o[H_NU] = (int32_t)mu; o[H_NB] = (int32_t)mb; o[H_FIRST] = first;
    int32_t *ou = o + H_LEN, *ob = ou + 4 * mu, *orole = ob + 4 * mb, *oc = orole + mb;
    for (Py_ssize_t k = 0; k < mu; k++) {
        ou[4 * k] = un[k].a; ou[4 * k + 1] = un[k].b; ou[4 * k + 2] = un[k].c; ou[4 * k + 3] = un[k].pos;
    }
    for (Py_ssize_t k = 0; k < mb; k++) {
        ob[4 * k] = bi[k].a; ob[4 * k + 1] = bi[k].b; ob[4 * k + 2] = bi[k].c; ob[4 * k + 3] = counts[bi[k].pos];
        roles[k] = (int64_t)bi[k].c << 32 | (int64_t)k; /* relations by role, then in their order */
    }
    qsort(roles, mb, sizeof(int64_t), cmp_int64);
    for (Py_ssize_t k = 0; k < mb; k++) orole[k] = (int32_t)(roles[k] & 0xffffffff);
    memcpy(oc, concept, sizeof(int32_t) * n);
}

/* The encoding's bytes from a graph's raw features (merge_features, then write_encoding). */
static PyObject *pack_encoding(Py_ssize_t n, Raw4 *un, Py_ssize_t nu, Raw4 *bi, Py_ssize_t nb, const int32_t *concept,
                               int32_t first) {
    int32_t *counts = PyMem_Malloc(sizeof(int32_t) * (nb + 1));
    int64_t *roles = PyMem_Malloc(sizeof(int64_t) * (nb + 1));
    PyObject *result = NULL;
    if (!counts || !roles) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t len = merge_features(n, un, &nu, bi, &nb, counts);
    if ((result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int32_t) * len)))
        write_encoding((int32_t *)PyBytes_AS_STRING(result), n, un, nu, bi, nb, counts, concept, first, roles);
done:
    PyMem_Free(counts);
    PyMem_Free(roles);
    return result;
}

/* What _penman_reader exports to _smatch_core (capsule PAIR_READER_CAPSULE) so align_texts reads, encodes and aligns
 * pairs on its threads without the GIL. read_pair reads both graphs of a pair (ASCII texts) into encodings with one
 * label table of the pair's own: 1 done (out[0], out[1] valid until the scratch's next use; triples: each graph's
 * triples counted), 0 refused (the Python path reads the pair), -1 out of memory. Label ids differ from the process
 * table's, but the search compares them only for equality, so every result is the same. */
#define PAIR_READER_CAPSULE "amrsim.amr._penman_reader._pair_reader"
typedef struct {
    void *(*scratch_new)(void);
    void (*scratch_free)(void *scratch);
    int (*read_pair)(void *scratch, const char *text1, Py_ssize_t n1, const char *text2, Py_ssize_t n2, int smatch,
                     const int32_t *out[2], int32_t triples[2]);
} PairReader;

#endif
