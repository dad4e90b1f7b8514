/* Content keys of rows whose parts are all strings, hashed in one C loop.
 *
 * text_keys(head, columns, tail) -> list[str]: for row i, the first 32 hex digits of
 *   SHA-256(head + json(columns[0][i]) + SEP + json(columns[1][i]) + SEP + ... + tail)
 * where json(s) is what `json.encoder.encode_basestring(s).encode("utf-8")` gives (ensure_ascii=False: '"', '\\'
 * and the control characters below 0x20 escaped, everything else as its UTF-8 bytes) and SEP is b"\x1f". This is
 * exactly `amrsim.warehouse.keys.content_keys` for such rows; the Python function stays the reference and the
 * fallback (a test compares them). A cell that is not a str, or a str that is not valid Unicode (a lone surrogate),
 * raises TypeError / UnicodeEncodeError, and the caller uses the Python path.
 *
 * SHA-256 is OpenSSL's (the library Python's hashlib uses), through its EVP interface: the head's state is hashed
 * once and copied per row, as the Python function does with hashlib's copy().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <openssl/evp.h>
#include <string.h>

typedef struct {
    unsigned char *data;
    size_t len, cap;
} Buffer;

static int buffer_reserve(Buffer *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    unsigned char *data = PyMem_Realloc(b->data, cap);
    if (!data) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

/* Append json(text) + SEP. The escaped characters are all ASCII and UTF-8 continuation and lead bytes are >= 0x80,
 * so escaping the UTF-8 bytes one by one gives the encoding of the escaped text. */
static int append_json_string(Buffer *b, const char *text, Py_ssize_t size) {
    static const char hex[] = "0123456789abcdef";
    if (buffer_reserve(b, (size_t)size * 6 + 3) < 0) return -1; /* worst case: every byte as \u00XX */
    unsigned char *out = b->data + b->len;
    *out++ = '"';
    for (Py_ssize_t i = 0; i < size; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *out++ = c;
            continue;
        }
        *out++ = '\\';
        switch (c) {
            case '"': *out++ = '"'; break;
            case '\\': *out++ = '\\'; break;
            case '\b': *out++ = 'b'; break;
            case '\f': *out++ = 'f'; break;
            case '\n': *out++ = 'n'; break;
            case '\r': *out++ = 'r'; break;
            case '\t': *out++ = 't'; break;
            default:
                *out++ = 'u';
                *out++ = '0';
                *out++ = '0';
                *out++ = hex[c >> 4];
                *out++ = hex[c & 0xf];
        }
    }
    *out++ = '"';
    *out++ = 0x1f;
    b->len = (size_t)(out - b->data);
    return 0;
}

static PyObject *text_keys(PyObject *self, PyObject *args) {
    Py_buffer head, tail;
    PyObject *columns_arg;
    if (!PyArg_ParseTuple(args, "y*Oy*", &head, &columns_arg, &tail)) return NULL;
    PyObject *result = NULL, *columns = NULL;
    EVP_MD_CTX *base = NULL, *row_ctx = NULL;
    Buffer buf = {NULL, 0, 0};

    columns = PySequence_Fast(columns_arg, "columns must be a sequence of lists");
    if (!columns) goto done;
    Py_ssize_t ncols = PySequence_Fast_GET_SIZE(columns);
    PyObject **cols = PySequence_Fast_ITEMS(columns);
    Py_ssize_t nrows = -1;
    for (Py_ssize_t c = 0; c < ncols; c++) {
        if (!PyList_Check(cols[c])) {
            PyErr_SetString(PyExc_TypeError, "each column must be a list");
            goto done;
        }
        Py_ssize_t n = PyList_GET_SIZE(cols[c]);
        if (nrows >= 0 && n != nrows) {
            PyErr_SetString(PyExc_ValueError, "columns differ in length");
            goto done;
        }
        nrows = n;
    }
    if (nrows < 0) nrows = 0;

    base = EVP_MD_CTX_new();
    row_ctx = EVP_MD_CTX_new();
    if (!base || !row_ctx || EVP_DigestInit_ex(base, EVP_sha256(), NULL) != 1
        || EVP_DigestUpdate(base, head.buf, (size_t)head.len) != 1) {
        PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 failed");
        goto done;
    }
    result = PyList_New(nrows);
    if (!result) goto done;
    for (Py_ssize_t r = 0; r < nrows; r++) {
        buf.len = 0;
        for (Py_ssize_t c = 0; c < ncols; c++) {
            PyObject *cell = PyList_GET_ITEM(cols[c], r);
            if (!PyUnicode_CheckExact(cell)) {
                PyErr_Format(PyExc_TypeError, "row %zd, column %zd is not a str", r, c);
                goto fail;
            }
            Py_ssize_t size;
            const char *text = PyUnicode_AsUTF8AndSize(cell, &size); /* fails on a lone surrogate */
            if (!text || append_json_string(&buf, text, size) < 0) goto fail;
        }
        if (buffer_reserve(&buf, (size_t)tail.len) < 0) goto fail;
        memcpy(buf.data + buf.len, tail.buf, (size_t)tail.len);
        buf.len += (size_t)tail.len;
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned int digest_len = 0;
        if (EVP_MD_CTX_copy_ex(row_ctx, base) != 1 || EVP_DigestUpdate(row_ctx, buf.data, buf.len) != 1
            || EVP_DigestFinal_ex(row_ctx, digest, &digest_len) != 1 || digest_len < 16) {
            PyErr_SetString(PyExc_RuntimeError, "OpenSSL SHA-256 failed");
            goto fail;
        }
        static const char hex[] = "0123456789abcdef";
        char key[32];
        for (int i = 0; i < 16; i++) {
            key[2 * i] = hex[digest[i] >> 4];
            key[2 * i + 1] = hex[digest[i] & 0xf];
        }
        PyObject *text_key = PyUnicode_FromStringAndSize(key, 32);
        if (!text_key) goto fail;
        PyList_SET_ITEM(result, r, text_key);
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    PyMem_Free(buf.data);
    EVP_MD_CTX_free(base);
    EVP_MD_CTX_free(row_ctx);
    Py_XDECREF(columns);
    PyBuffer_Release(&head);
    PyBuffer_Release(&tail);
    return result;
}

static PyMethodDef methods[] = {
    {"text_keys", text_keys, METH_VARARGS,
     "text_keys(head: bytes, columns: list of lists of str, tail: bytes) -> list[str]: content keys of rows of "
     "strings (see amrsim.warehouse.keys.text_keys)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_keys", NULL, -1, methods};

PyMODINIT_FUNC PyInit__keys(void) { return PyModule_Create(&module); }
