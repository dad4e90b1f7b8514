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
static const int32_t *sort_roles_binary; /* binary block being sorted by role (qsort has no context argument) */
static int cmp_role(const void *x, const void *y) {
    int32_t i = *(const int32_t *)x, j = *(const int32_t *)y;
    int32_t ri = sort_roles_binary[4 * i + 2], rj = sort_roles_binary[4 * j + 2];
    if (ri != rj) return ri < rj ? -1 : 1;
    return (i > j) - (i < j);
}


/* The encoding's bytes from a graph's raw features, both arrays sorted and merged here (their .pos fields are
 * scratch): un: (kind or role, label, node) unary features; bi: (node, node, role, k) relations, k their order;
 * concept: each node's concept id or -1; first: the first instance's concept or -1. */
static PyObject *pack_encoding(Py_ssize_t n, Raw4 *un, Py_ssize_t nu, Raw4 *bi, Py_ssize_t nb, const int32_t *concept,
                               int32_t first) {
    /* merge equal unary features (sorted) and equal relations (first occurrence order kept) */
    qsort(un, nu, sizeof(Raw4), cmp_unary);
    Py_ssize_t mu = 0;
    for (Py_ssize_t k = 0; k < nu; k++) {
        if (mu && !cmp_unary(&un[mu - 1], &un[k])) un[mu - 1].pos++;
        else { un[mu] = un[k]; un[mu].pos = 1; mu++; }
    }
    qsort(bi, nb, sizeof(Raw4), cmp_binary);
    Py_ssize_t mb = 0;
    int32_t *counts = PyMem_Malloc(sizeof(int32_t) * (nb + 1));
    if (!counts) return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < nb; k++) {
        if (mb && bi[mb - 1].a == bi[k].a && bi[mb - 1].b == bi[k].b && bi[mb - 1].c == bi[k].c)
            counts[bi[mb - 1].pos]++;
        else { bi[mb] = bi[k]; counts[bi[k].pos] = 1; mb++; }
    }
    qsort(bi, mb, sizeof(Raw4), cmp_pos);
    Py_ssize_t len = H_LEN + 4 * mu + 4 * mb + mb + n;
    PyObject *result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int32_t) * len);
    if (!result) {
        PyMem_Free(counts);
        return NULL;
    }
    int32_t *o = (int32_t *)PyBytes_AS_STRING(result);
    o[H_N] = (int32_t)n; o[H_NU] = (int32_t)mu; o[H_NB] = (int32_t)mb; o[H_FIRST] = first;
    int32_t *ou = o + H_LEN, *ob = ou + 4 * mu, *orole = ob + 4 * mb, *oc = orole + mb;
    for (Py_ssize_t k = 0; k < mu; k++) {
        ou[4 * k] = un[k].a; ou[4 * k + 1] = un[k].b; ou[4 * k + 2] = un[k].c; ou[4 * k + 3] = un[k].pos;
    }
    for (Py_ssize_t k = 0; k < mb; k++) {
        ob[4 * k] = bi[k].a; ob[4 * k + 1] = bi[k].b; ob[4 * k + 2] = bi[k].c; ob[4 * k + 3] = counts[bi[k].pos];
        orole[k] = (int32_t)k;
    }
    PyMem_Free(counts);
    sort_roles_binary = ob;
    qsort(orole, mb, sizeof(int32_t), cmp_role);
    memcpy(oc, concept, sizeof(int32_t) * n);
    return result;
}

#endif
