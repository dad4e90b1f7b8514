/* Smatch alignment search: seeded hill-climbing restarts, then exact branch-and-bound.
 *
 * Problem: map nodes of graph 1 (n1) injectively (or to nothing, -1) onto nodes of graph 2 (n2) to maximise
 *   sum_i U[i][m_i] + sum over quads (i,j,k,l,w) with m_i == j and m_k == l of w
 * U holds instance/attribute/self-loop matches of one node pair, quads the relation matches of two node pairs.
 *
 * align(n1, n2, U, quads, conc1, conc2, seed, restarts, node_budget, work_budget)
 *   -> (best, optimal, expanded, work, mapping)
 * work counts the adjacency entries every phase reads; no phase starts (and climbing and branch and bound stop) once
 * it reaches work_budget, so one call does at most work_budget plus one climbing step of work, whatever the graphs.
 *   U: int32 buffer n1*n2; quads: int32 buffer 5*q (each unordered pair of node pairs once);
 *   conc1/conc2: int32 concept ids (smart initialisation maps equal concepts first).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int n1, n2;
    const int32_t *U;
    const int32_t *conc1, *conc2;
    int *adj_start, *adj_k, *adj_l, *adj_w;  /* per cell i*n2+j: entries (k, l, w) */
    int *grp_start, *grp_k, *grp_w;          /* per cell: (k, max_l w) */
    int *cand_start, *cand;                  /* per i: candidate j (ascending) */
    int *m, *used;                           /* current mapping; used[j] = i or -1 */
    /* branch and bound */
    int *order, *pos, *asg, *bm, *bbuf;
    int norder, best;
    long long expanded, budget;
    long long work, work_budget;             /* operations done / allowed in this call (all phases) */
    int aborted;
    uint64_t rng;
} Ctx;

static uint64_t next_rand(Ctx *c) { /* splitmix64 */
    uint64_t z = (c->rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* contribution of i mapped to j given the rest of the mapping (pairs counted fully) */
static inline int with_cell(Ctx *c, int i, int j) {
    if (j < 0) return 0;
    int cell = i * c->n2 + j, s = c->U[cell];
    c->work += 1 + c->adj_start[cell + 1] - c->adj_start[cell];
    for (int e = c->adj_start[cell]; e < c->adj_start[cell + 1]; e++)
        if (c->m[c->adj_k[e]] == c->adj_l[e]) s += c->adj_w[e];
    return s;
}

static inline int pair_w(Ctx *c, int i, int x, int k, int y) {
    if (x < 0 || y < 0) return 0;
    int cell = i * c->n2 + x, s = 0;
    c->work += 1 + c->adj_start[cell + 1] - c->adj_start[cell];
    for (int e = c->adj_start[cell]; e < c->adj_start[cell + 1]; e++)
        if (c->adj_k[e] == k && c->adj_l[e] == y) s += c->adj_w[e];
    return s;
}

static int total_score(const Ctx *c, const int *m) {
    int s = 0;
    for (int i = 0; i < c->n1; i++) {
        int j = m[i];
        if (j < 0) continue;
        int cell = i * c->n2 + j;
        s += c->U[cell];
        for (int e = c->adj_start[cell]; e < c->adj_start[cell + 1]; e++)
            if (c->adj_k[e] > i && m[c->adj_k[e]] == c->adj_l[e]) s += c->adj_w[e];
    }
    return s;
}

static void set_map(Ctx *c, int i, int j) {
    if (c->m[i] >= 0) c->used[c->m[i]] = -1;
    c->m[i] = j;
    if (j >= 0) c->used[j] = i;
}

/* steepest-ascent hill-climbing with moves (to a free candidate) and swaps, as smatch does; stops early (at a
 * valid mapping whose score it returns) once the call's work budget is spent */
static int climb(Ctx *c) {
    int score = total_score(c, c->m);
    while (c->work < c->work_budget) {
        int best_gain = 0, op = 0, oi = -1, ox = -1;
        for (int i = 0; i < c->n1; i++) {
            int a = c->m[i];
            int la = with_cell(c, i, a);
            for (int t = c->cand_start[i]; t < c->cand_start[i + 1]; t++) {
                int j = c->cand[t];
                if (j == a) continue;
                int k = c->used[j];
                if (k < 0) {
                    int g = with_cell(c, i, j) - la;
                    if (g > best_gain) { best_gain = g; op = 1; oi = i; ox = j; }
                } else {
                    /* swap i <-> k: i gets j, k gets a */
                    int lk = with_cell(c, k, j);
                    int old = la + lk - pair_w(c, i, a, k, j);
                    c->m[i] = j; c->m[k] = a;
                    int nw = with_cell(c, i, j) + with_cell(c, k, a) - pair_w(c, i, j, k, a);
                    c->m[i] = a; c->m[k] = j;
                    int g = nw - old;
                    if (g > best_gain) { best_gain = g; op = 2; oi = i; ox = k; }
                }
            }
        }
        if (best_gain <= 0) break;
        if (op == 1) {
            set_map(c, oi, ox);
        } else {
            int a = c->m[oi], b = c->m[ox];
            c->m[oi] = b; c->m[ox] = a;
            if (b >= 0) c->used[b] = oi;
            if (a >= 0) c->used[a] = ox;
        }
        score += best_gain;
    }
    return score;
}

static void clear_map(Ctx *c) {
    for (int i = 0; i < c->n1; i++) c->m[i] = -1;
    for (int j = 0; j < c->n2; j++) c->used[j] = -1;
}

static void smart_init(Ctx *c) {
    clear_map(c);
    /* equal concepts first, preferring the same position (identical layouts map onto themselves) */
    for (int i = 0; i < c->n1; i++) {
        if (i < c->n2 && c->conc1[i] == c->conc2[i] && c->used[i] < 0) { set_map(c, i, i); continue; }
    }
    for (int i = 0; i < c->n1; i++) {
        if (c->m[i] >= 0) continue;
        for (int t = c->cand_start[i]; t < c->cand_start[i + 1]; t++) {
            int j = c->cand[t];
            if (c->used[j] < 0 && c->conc1[i] == c->conc2[j]) { set_map(c, i, j); break; }
        }
    }
    for (int i = 0; i < c->n1; i++) {
        if (c->m[i] >= 0) continue;
        int nc = c->cand_start[i + 1] - c->cand_start[i];
        if (nc == 0) continue;
        int off = (int)(next_rand(c) % (uint64_t)nc);
        for (int t = 0; t < nc; t++) {
            int j = c->cand[c->cand_start[i] + (off + t) % nc];
            if (c->used[j] < 0) { set_map(c, i, j); break; }
        }
    }
}

static void random_init(Ctx *c) {
    clear_map(c);
    for (int i = 0; i < c->n1; i++) {
        int nc = c->cand_start[i + 1] - c->cand_start[i];
        if (nc == 0) continue;
        int off = (int)(next_rand(c) % (uint64_t)nc);
        for (int t = 0; t < nc; t++) {
            int j = c->cand[c->cand_start[i] + (off + t) % nc];
            if (c->used[j] < 0) { set_map(c, i, j); break; }
        }
    }
}

/* optimistic value of unassigned node i: best free candidate, exact pairs with assigned nodes,
 * best-case pairs with unassigned nodes later in the order (each such pair is charged to one side only) */
static int node_bound(Ctx *c, int i, int *gain_exact) {
    int best = 0;
    for (int t = c->cand_start[i]; t < c->cand_start[i + 1]; t++) {
        int j = c->cand[t];
        if (c->used[j] >= 0) continue;
        int cell = i * c->n2 + j, s = c->U[cell];
        c->work += 1 + (c->adj_start[cell + 1] - c->adj_start[cell]) + (c->grp_start[cell + 1] - c->grp_start[cell]);
        for (int e = c->adj_start[cell]; e < c->adj_start[cell + 1]; e++) {
            int k = c->adj_k[e];
            if (c->asg[k] && c->m[k] == c->adj_l[e]) s += c->adj_w[e];
        }
        if (gain_exact) gain_exact[t - c->cand_start[i]] = s;
        for (int e = c->grp_start[cell]; e < c->grp_start[cell + 1]; e++) {
            int k = c->grp_k[e];
            if (!c->asg[k] && c->pos[k] > c->pos[i]) s += c->grp_w[e];
        }
        if (s > best) best = s;
    }
    return best;
}

static void bb(Ctx *c, int d, int cur) {
    if (c->aborted) return;
    if (c->expanded >= c->budget || c->work >= c->work_budget) { c->aborted = 1; return; }
    c->expanded++;
    if (cur > c->best) { c->best = cur; memcpy(c->bm, c->m, sizeof(int) * c->n1); }
    if (d == c->norder) return;
    int ub = cur;
    for (int t = d + 1; t < c->norder; t++) ub += node_bound(c, c->order[t], NULL);
    int i = c->order[d];
    int nc = c->cand_start[i + 1] - c->cand_start[i];
    int *gain = c->bbuf + (size_t)d * (c->n2 + 1) * 2;
    int *opt = gain + (c->n2 + 1);
    /* per-candidate exact gain and optimistic value */
    int best_i = 0;
    for (int t = 0; t < nc; t++) {
        int j = c->cand[c->cand_start[i] + t];
        opt[t] = -1;
        if (c->used[j] >= 0) continue;
        int cell = i * c->n2 + j, s = c->U[cell];
        c->work += 1 + (c->adj_start[cell + 1] - c->adj_start[cell]) + (c->grp_start[cell + 1] - c->grp_start[cell]);
        for (int e = c->adj_start[cell]; e < c->adj_start[cell + 1]; e++) {
            int k = c->adj_k[e];
            if (c->asg[k] && c->m[k] == c->adj_l[e]) s += c->adj_w[e];
        }
        gain[t] = s;
        for (int e = c->grp_start[cell]; e < c->grp_start[cell + 1]; e++) {
            int k = c->grp_k[e];
            if (!c->asg[k] && c->pos[k] > c->pos[i]) s += c->grp_w[e];
        }
        opt[t] = s;
        if (s > best_i) best_i = s;
    }
    if (ub + best_i <= c->best) return;
    /* children in decreasing optimistic value; then leave i unmapped */
    for (;;) {
        int bt = -1;
        for (int t = 0; t < nc; t++)
            if (opt[t] >= 0 && (bt < 0 || opt[t] > opt[bt])) bt = t;
        if (bt < 0) break;
        int o = opt[bt];
        opt[bt] = -1;
        if (ub + o <= c->best) break;
        int j = c->cand[c->cand_start[i] + bt];
        c->asg[i] = 1; set_map(c, i, j);
        bb(c, d + 1, cur + gain[bt]);
        set_map(c, i, -1); c->asg[i] = 0;
        if (c->aborted) return;
    }
    if (ub > c->best) {
        c->asg[i] = 1;
        bb(c, d + 1, cur);
        c->asg[i] = 0;
    }
}

static int *sort_keys;
static int cmp_order(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (sort_keys[x] != sort_keys[y]) return sort_keys[y] - sort_keys[x];
    return x - y;
}

static PyObject *align(PyObject *self, PyObject *args) {
    int n1, n2, restarts;
    unsigned long long seed;
    long long budget, work_budget;
    Py_buffer ub, qb, c1b, c2b;
    if (!PyArg_ParseTuple(args, "iiy*y*y*y*KiLL", &n1, &n2, &ub, &qb, &c1b, &c2b, &seed, &restarts, &budget,
                          &work_budget))
        return NULL;
    PyObject *result = NULL;
    Ctx c;
    memset(&c, 0, sizeof(c));
    size_t cells = (size_t)n1 * (size_t)n2;
    Py_ssize_t nq = qb.len / (Py_ssize_t)(5 * sizeof(int32_t));
    if (n1 < 0 || n2 < 0 || ub.len != (Py_ssize_t)(cells * sizeof(int32_t)) ||
        c1b.len != (Py_ssize_t)(n1 * sizeof(int32_t)) || c2b.len != (Py_ssize_t)(n2 * sizeof(int32_t))) {
        PyErr_SetString(PyExc_ValueError, "align: buffer sizes do not match n1, n2");
        goto done;
    }
    const int32_t *q = (const int32_t *)qb.buf;
    for (Py_ssize_t t = 0; t < nq; t++) {
        const int32_t *e = q + 5 * t;
        if (e[0] < 0 || e[0] >= n1 || e[2] < 0 || e[2] >= n1 || e[1] < 0 || e[1] >= n2 || e[3] < 0 ||
            e[3] >= n2 || e[0] == e[2] || e[1] == e[3]) {
            PyErr_SetString(PyExc_ValueError, "align: quad out of range");
            goto done;
        }
    }
    c.n1 = n1; c.n2 = n2;
    c.U = (const int32_t *)ub.buf;
    c.conc1 = (const int32_t *)c1b.buf; c.conc2 = (const int32_t *)c2b.buf;
    c.rng = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
    c.budget = budget;
    c.work_budget = work_budget > 0 ? work_budget : 1;
    c.adj_start = calloc(cells + 1, sizeof(int));
    c.grp_start = calloc(cells + 1, sizeof(int));
    c.adj_k = malloc(sizeof(int) * (2 * nq + 1));
    c.adj_l = malloc(sizeof(int) * (2 * nq + 1));
    c.adj_w = malloc(sizeof(int) * (2 * nq + 1));
    c.grp_k = malloc(sizeof(int) * (2 * nq + 1));
    c.grp_w = malloc(sizeof(int) * (2 * nq + 1));
    c.cand_start = calloc((size_t)n1 + 1, sizeof(int));
    c.cand = malloc(sizeof(int) * (cells + 1));
    c.m = malloc(sizeof(int) * (n1 + 1));
    c.used = malloc(sizeof(int) * (n2 + 1));
    c.order = malloc(sizeof(int) * (n1 + 1));
    c.pos = malloc(sizeof(int) * (n1 + 1));
    c.asg = malloc(sizeof(int) * (n1 + 1));
    c.bm = malloc(sizeof(int) * (n1 + 1));
    c.bbuf = malloc(sizeof(int) * ((size_t)(n1 + 1) * (n2 + 1) * 2));
    int *fill = calloc(cells + 1, sizeof(int));
    int *keys = calloc((size_t)n1 + 1, sizeof(int));
    if (!c.adj_start || !c.grp_start || !c.adj_k || !c.adj_l || !c.adj_w || !c.grp_k || !c.grp_w ||
        !c.cand_start || !c.cand || !c.m || !c.used || !c.order || !c.pos || !c.asg || !c.bm || !c.bbuf ||
        !fill || !keys) {
        free(fill); free(keys);
        PyErr_NoMemory();
        goto done;
    }
    /* adjacency (both directions) in CSR */
    for (Py_ssize_t t = 0; t < nq; t++) {
        const int32_t *e = q + 5 * t;
        c.adj_start[e[0] * n2 + e[1] + 1]++;
        c.adj_start[e[2] * n2 + e[3] + 1]++;
    }
    for (size_t x = 0; x < cells; x++) c.adj_start[x + 1] += c.adj_start[x];
    for (Py_ssize_t t = 0; t < nq; t++) {
        const int32_t *e = q + 5 * t;
        int a = e[0] * n2 + e[1], b = e[2] * n2 + e[3];
        int pa = c.adj_start[a] + fill[a]++, pb = c.adj_start[b] + fill[b]++;
        c.adj_k[pa] = e[2]; c.adj_l[pa] = e[3]; c.adj_w[pa] = e[4];
        c.adj_k[pb] = e[0]; c.adj_l[pb] = e[1]; c.adj_w[pb] = e[4];
    }
    /* per cell, the best weight towards each other node k (over its targets l) */
    int ng = 0;
    for (size_t x = 0; x < cells; x++) {
        c.grp_start[x] = ng;
        int s = c.adj_start[x], t_end = c.adj_start[x + 1];
        for (int e = s; e < t_end; e++) {
            int k = c.adj_k[e], found = -1;
            for (int g = c.grp_start[x]; g < ng; g++)
                if (c.grp_k[g] == k) { found = g; break; }
            if (found < 0) { c.grp_k[ng] = k; c.grp_w[ng] = c.adj_w[e]; ng++; }
            else if (c.adj_w[e] > c.grp_w[found]) c.grp_w[found] = c.adj_w[e];
        }
    }
    c.grp_start[cells] = ng;
    free(fill);
    /* candidates and branching order (most promising nodes first) */
    int nc = 0;
    for (int i = 0; i < n1; i++) {
        c.cand_start[i] = nc;
        int best = 0;
        for (int j = 0; j < n2; j++) {
            int cell = i * n2 + j;
            if (c.U[cell] > 0 || c.adj_start[cell + 1] > c.adj_start[cell]) {
                c.cand[nc++] = j;
                int v = c.U[cell];
                for (int g = c.grp_start[cell]; g < c.grp_start[cell + 1]; g++) v += c.grp_w[g];
                if (v > best) best = v;
            }
        }
        keys[i] = best;
    }
    c.cand_start[n1] = nc;
    c.norder = 0;
    for (int i = 0; i < n1; i++)
        if (c.cand_start[i + 1] > c.cand_start[i]) c.order[c.norder++] = i;
    sort_keys = keys;
    qsort(c.order, c.norder, sizeof(int), cmp_order);
    free(keys);
    for (int i = 0; i < n1; i++) { c.pos[i] = n1 + 1; c.asg[i] = 1; }
    for (int t = 0; t < c.norder; t++) { c.pos[c.order[t]] = t; c.asg[c.order[t]] = 0; }

    /* hill-climbing: smart init, then seeded random restarts (while work is left) */
    c.best = -1;
    for (int r = 0; r <= (restarts > 0 ? restarts : 0) && (r == 0 || c.work < c.work_budget); r++) {
        if (r == 0) smart_init(&c); else random_init(&c);
        int s = climb(&c);
        if (s > c.best) { c.best = s; memcpy(c.bm, c.m, sizeof(int) * n1); }
    }
    /* exact branch and bound from the incumbent */
    clear_map(&c);
    c.expanded = 0; c.aborted = 0;
    if (budget > 0) bb(&c, 0, 0); else c.aborted = 1;
    if (c.aborted && budget > 0) {
        /* budget spent without a proof: many more seeded restarts before giving up */
        int extra = 50 * ((restarts > 0 ? restarts : 0) + 1);
        for (int r = 0; r < extra && c.work < c.work_budget; r++) {
            random_init(&c);
            int s = climb(&c);
            if (s > c.best) { c.best = s; memcpy(c.bm, c.m, sizeof(int) * n1); }
        }
    }
    PyObject *mapping = PyTuple_New(n1);
    if (!mapping) goto done;
    for (int i = 0; i < n1; i++) PyTuple_SET_ITEM(mapping, i, PyLong_FromLong(c.bm[i]));
    result = Py_BuildValue("iOLLN", c.best, c.aborted ? Py_False : Py_True, c.expanded, c.work, mapping);
done:
    free(c.adj_start); free(c.grp_start); free(c.adj_k); free(c.adj_l); free(c.adj_w); free(c.grp_k);
    free(c.grp_w); free(c.cand_start); free(c.cand); free(c.m); free(c.used); free(c.order); free(c.pos);
    free(c.asg); free(c.bm); free(c.bbuf);
    PyBuffer_Release(&ub); PyBuffer_Release(&qb); PyBuffer_Release(&c1b); PyBuffer_Release(&c2b);
    return result;
}

static PyMethodDef methods[] = {
    {"align", align, METH_VARARGS,
     "align(n1, n2, U, quads, conc1, conc2, seed, restarts, node_budget, work_budget)"
     " -> (best, optimal, expanded, work, mapping)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_smatch_core", "Smatch alignment search in C.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__smatch_core(void) { return PyModule_Create(&module); }
