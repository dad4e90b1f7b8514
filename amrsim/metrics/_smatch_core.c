/* Smatch alignment search: seeded hill-climbing restarts, then exact branch-and-bound.
 *
 * Problem: map nodes of graph 1 (n1) injectively (or to nothing, -1) onto nodes of graph 2 (n2) to maximise
 *   sum_i U[i][m_i] + sum over quads (i,j,k,l,w) with m_i == j and m_k == l of w
 * U holds instance/attribute/self-loop matches of one node pair, quads the relation matches of two node pairs.
 *
 * align(n1, n2, U, quads, conc1, conc2, seed, restarts, node_budget, work_budget)
 *   -> (best, optimal, expanded, work, mapping)
 * (encode / align_encoded below build these tables from two graphs' triples in C: what smatch.py calls per pair.)
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
#include <time.h>
#ifndef _WIN32
#include <pthread.h>
#endif

typedef struct {
    int n1, n2;
    const int32_t *U;
    const int32_t *conc1, *conc2;
    int *adj_start, *adj_k, *adj_l, *adj_w;  /* per cell i*n2+j: entries (k, l, w) */
    int *adj_later;                          /* per cell: where its entries with k later in the order start */
    int *matched;                            /* branch and bound: per cell (i, j), the pair matches of i -> j with
                                              * the nodes mapped so far (kept as they are mapped and unmapped) */
    int *grp_start, *grp_k, *grp_w;          /* per cell: (k, max_l w) */
    int *cand_start, *cand;                  /* per i: candidate j (ascending) */
    int *m, *used;                           /* current mapping; used[j] = i or -1 */
    /* branch and bound */
    int *order, *pos, *asg, *bm, *bbuf;
    int *held;                               /* climb: each node's current contribution */
    int *nbv;                                /* per depth d, node_bound of each node later in the order */
    uint64_t *touched_by;                    /* per node j of graph 2, the nodes whose node_bound taking j changes */
    int words;                               /* 64-bit words per set */
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
        int best_gain = 0, op = 0, oi = -1, ox = -1, *held = c->held;
        for (int i = 0; i < c->n1; i++) held[i] = with_cell(c, i, c->m[i]);  /* what each node's mapping earns now */
        for (int i = 0; i < c->n1; i++) {
            /* a step over large tables (thousands of nodes) is itself far past the budget: it stops at the node where
             * the budget runs out, and the best move found so far is taken (a search that proves its optimum never
             * gets here: its climbing ends below the budget) */
            if (c->work >= c->work_budget) break;
            int a = c->m[i];
            int la = held[i];
            for (int t = c->cand_start[i]; t < c->cand_start[i + 1]; t++) {
                int j = c->cand[t];
                if (j == a) continue;
                int k = c->used[j];
                if (k < 0) {
                    int g = with_cell(c, i, j) - la;
                    if (g > best_gain) { best_gain = g; op = 1; oi = i; ox = j; }
                } else {
                    /* swap i <-> k: i gets j, k gets a */
                    int lk = held[k];
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

/* optimistic value of mapping unassigned node i to free node j: its unary matches, the exact pair matches with
 * assigned nodes (also stored in *exact), and for each unassigned node k later in the order (each such pair is
 * charged to one side only) the best weight towards a node l that k can still take: free, and not j.
 * The exact matches are kept per cell as nodes are mapped (`map_matches`); a cell's entries with k later in the
 * order, all unassigned (nodes are assigned in order, and i is not yet), come last in the cell, sorted by k (see
 * `search`), so the best weight per k is a running maximum. The same sums as testing each entry's state, so the
 * same search, and the same work counted. */
static inline int cell_value(Ctx *c, int i, int j, int *exact) {
    int cell = i * c->n2 + j, s = c->U[cell] + c->matched[cell], extra = 0;
    int later = c->adj_later[cell], e1 = c->adj_start[cell + 1];
    const int *ak = c->adj_k, *al = c->adj_l, *aw = c->adj_w, *used = c->used;
    c->work += 1 + (e1 - c->adj_start[cell]);
    int k = -1, kbest = 0;
    for (int e = later; e < e1; e++) {  /* without branches on the entries' states: they are unpredictable */
        int l = al[e], w = aw[e] & -((l != j) & (used[l] < 0));
        if (ak[e] != k) { extra += kbest; k = ak[e]; kbest = 0; }
        kbest = w > kbest ? w : kbest;
    }
    *exact = s;
    return s + extra + kbest;
}

/* i -> j mapped (sign 1) or unmapped (-1): each cell paired with (i, j) by a quad gains or loses its weight */
static inline void map_matches(Ctx *c, int i, int j, int sign) {
    int cell = i * c->n2 + j, n2 = c->n2;
    for (int e = c->adj_start[cell]; e < c->adj_start[cell + 1]; e++)
        c->matched[c->adj_k[e] * n2 + c->adj_l[e]] += sign * c->adj_w[e];
}

/* optimistic value of unassigned node i: its best free candidate */
static int node_bound(Ctx *c, int i) {
    int best = 0, exact;
    for (int t = c->cand_start[i]; t < c->cand_start[i + 1]; t++) {
        int j = c->cand[t];
        if (c->used[j] >= 0) continue;
        int s = cell_value(c, i, j, &exact);
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
    /* the bound of the nodes after this one: from the parent's, recomputing only the nodes whose value can have
     * changed. The parent's last step mapped its node p to j (leaving p unmapped changes no value): a node with a
     * quad towards (p, j) can gain (that pair is now exact), and is among those with a quad towards j; every other
     * value can only fall (j is taken), so the parent's value still bounds it, and the nodes with j as a candidate
     * or a quad towards j are recomputed to tighten theirs. */
    int ub = cur, *vals = c->nbv + (size_t)d * c->n1;
    if (d == 0) {
        for (int t = 1; t < c->norder; t++) ub += vals[c->order[t]] = node_bound(c, c->order[t]);
    } else {
        const int *prev = vals - c->n1;
        int pj = c->m[c->order[d - 1]];
        const uint64_t *changed = pj >= 0 ? c->touched_by + (size_t)pj * c->words : NULL;
        for (int t = d + 1; t < c->norder; t++) {
            int k = c->order[t];
            int v = (changed && (changed[k >> 6] >> (k & 63) & 1)) ? node_bound(c, k) : prev[k];
            vals[k] = v;
            ub += v;
        }
    }
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
        int s = cell_value(c, i, j, &gain[t]);
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
        c->asg[i] = 1; set_map(c, i, j); map_matches(c, i, j, 1);
        bb(c, d + 1, cur + gain[bt]);
        map_matches(c, i, j, -1); set_map(c, i, -1); c->asg[i] = 0;
        if (c->aborted) return;
    }
    if (ub > c->best) {
        c->asg[i] = 1;
        bb(c, d + 1, cur);
        c->asg[i] = 0;
    }
}

#define CACHED_TABLE ((size_t)2000000)  /* see search */

typedef struct {
    int best, optimal;
    long long expanded, work;
} Found;

/* The search on one pair's tables into *found (and the best mapping into `mapping`, n1 ints, where given); -1 if
 * out of memory. No Python API: align_many runs it on threads without the GIL. One allocation for every table. */
static int search(int n1, int n2, const int32_t *U, const int32_t *q, Py_ssize_t nq, const int32_t *conc1,
                  const int32_t *conc2, unsigned long long seed, int restarts, long long budget, long long work_budget,
                  int *mapping, Found *found) {
    Ctx c;
    memset(&c, 0, sizeof(c));
    size_t cells = (size_t)n1 * (size_t)n2, a1 = (size_t)n1 + 1, quads = 2 * (size_t)nq + 1;
    c.n1 = n1; c.n2 = n2;
    c.U = U;
    c.conc1 = conc1; c.conc2 = conc2;
    c.rng = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
    c.budget = budget;
    c.work_budget = work_budget > 0 ? work_budget : 1;
    /* Past CACHED_TABLE entries (cells and adjacency entries) the tables no longer fit in the caches and a unit of
     * work costs tens of times more (a read from memory, not from cache): the budget shrinks in proportion to the
     * tables, so time, not just work, stays bounded on graphs of thousands of nodes. Ordinary graphs (a few hundred
     * nodes at most) are far below it: their budget, work and scores are unchanged. */
    size_t table = cells + 2 * (size_t)nq;
    if (table > CACHED_TABLE) {
        long long scaled = (long long)((double)c.work_budget * (double)CACHED_TABLE / (double)table);
        c.work_budget = scaled > 0 ? scaled : 1;
    }
    c.words = (n1 + 63) / 64;
    size_t bitsets = ((size_t)n2 + 1) * (size_t)c.words;
    /* ints: adj_start, adj_later, matched, grp_start, fill, cand (cells+1 each); adj k/l/w, grp k/w (quads each);
     * cand_start, m, order, pos, asg, bm, held, keys (n1+1 each); used (n2+1); nbv; bbuf */
    size_t ints = 6 * (cells + 1) + 5 * quads + 8 * a1 + ((size_t)n2 + 1) + a1 * a1 + a1 * ((size_t)n2 + 1) * 2;
    uint64_t *arena = calloc(bitsets + (ints + 1) / 2 + 1, sizeof(uint64_t));
    if (!arena) return -1;
    c.touched_by = arena;
    int *at = (int *)(arena + bitsets);
#define CARVE(field, count) do { field = at; at += (count); } while (0)
    int *fill, *keys;
    CARVE(c.adj_start, cells + 1); CARVE(c.adj_later, cells + 1); CARVE(c.matched, cells + 1);
    CARVE(c.grp_start, cells + 1); CARVE(fill, cells + 1); CARVE(c.cand, cells + 1);
    CARVE(c.adj_k, quads); CARVE(c.adj_l, quads); CARVE(c.adj_w, quads); CARVE(c.grp_k, quads); CARVE(c.grp_w, quads);
    CARVE(c.cand_start, a1); CARVE(c.m, a1); CARVE(c.order, a1); CARVE(c.pos, a1); CARVE(c.asg, a1); CARVE(c.bm, a1);
    CARVE(c.held, a1); CARVE(keys, a1);
    CARVE(c.used, (size_t)n2 + 1); CARVE(c.nbv, a1 * a1); CARVE(c.bbuf, a1 * ((size_t)n2 + 1) * 2);
#undef CARVE
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
            int k = c.adj_k[e], found_at = -1;
            for (int g = c.grp_start[x]; g < ng; g++)
                if (c.grp_k[g] == k) { found_at = g; break; }
            if (found_at < 0) { c.grp_k[ng] = k; c.grp_w[ng] = c.adj_w[e]; ng++; }
            else if (c.adj_w[e] > c.grp_w[found_at]) c.grp_w[found_at] = c.adj_w[e];
        }
    }
    c.grp_start[cells] = ng;
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
    /* the nodes whose bound taking j can change: those with j as a candidate, or with a quad towards j */
    for (Py_ssize_t t = 0; t < nq; t++) {
        const int32_t *e = q + 5 * t;
        c.touched_by[(size_t)e[3] * c.words + (e[0] >> 6)] |= 1ULL << (e[0] & 63);
        c.touched_by[(size_t)e[1] * c.words + (e[2] >> 6)] |= 1ULL << (e[2] & 63);
    }
    for (int i = 0; i < n1; i++)
        for (int t = c.cand_start[i]; t < c.cand_start[i + 1]; t++)
            c.touched_by[(size_t)c.cand[t] * c.words + (i >> 6)] |= 1ULL << (i & 63);
    c.norder = 0;
    for (int i = 0; i < n1; i++)
        if (c.cand_start[i + 1] > c.cand_start[i]) c.order[c.norder++] = i;
    /* by key, largest first, ties by node (the order is ascending before): a stable insertion sort, no global
     * comparator state, so threads can search at once */
    for (int x = 1; x < c.norder; x++) {
        int v = c.order[x], y = x - 1;
        while (y >= 0 && keys[c.order[y]] < keys[v]) { c.order[y + 1] = c.order[y]; y--; }
        c.order[y + 1] = v;
    }
    for (int i = 0; i < n1; i++) { c.pos[i] = n1 + 1; c.asg[i] = 1; }
    for (int t = 0; t < c.norder; t++) { c.pos[c.order[t]] = t; c.asg[c.order[t]] = 0; }
    /* each cell's entries for cell_value: those with k later than i in the order last, by k (an insertion sort on
     * that key, 0 for the others: a few entries per cell). A node outside the order never maps: never among them. */
    for (size_t x = 0; x < cells; x++) {
        int i = (int)(x / (size_t)n2), e1 = c.adj_start[x + 1], later = c.adj_start[x];
#define LATER_KEY(k) (!c.asg[k] && c.pos[k] > c.pos[i] ? (k) + 1 : 0)
        for (int e = c.adj_start[x] + 1; e < e1; e++) {
            int tk = c.adj_k[e], tl = c.adj_l[e], tw = c.adj_w[e], key = LATER_KEY(tk), y = e - 1;
            for (; y >= c.adj_start[x] && LATER_KEY(c.adj_k[y]) > key; y--) {
                c.adj_k[y + 1] = c.adj_k[y]; c.adj_l[y + 1] = c.adj_l[y]; c.adj_w[y + 1] = c.adj_w[y];
            }
            c.adj_k[y + 1] = tk; c.adj_l[y + 1] = tl; c.adj_w[y + 1] = tw;
        }
        while (later < e1 && !LATER_KEY(c.adj_k[later])) later++;
#undef LATER_KEY
        c.adj_later[x] = later;
    }

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
    found->best = c.best; found->optimal = !c.aborted; found->expanded = c.expanded; found->work = c.work;
    if (mapping) memcpy(mapping, c.bm, sizeof(int) * n1);
    free(arena);
    return 0;
}

/* The search on one pair's tables; returns (best, optimal, expanded, work, mapping) or NULL (no memory). */
static PyObject *align_core(int n1, int n2, const int32_t *U, const int32_t *q, Py_ssize_t nq, const int32_t *conc1,
                            const int32_t *conc2, unsigned long long seed, int restarts, long long budget,
                            long long work_budget) {
    Found f;
    int *m = malloc(sizeof(int) * ((size_t)n1 + 1));
    if (!m || search(n1, n2, U, q, nq, conc1, conc2, seed, restarts, budget, work_budget, m, &f) < 0) {
        free(m);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL, *mapping = PyTuple_New(n1);
    if (mapping) {
        for (int i = 0; i < n1; i++) PyTuple_SET_ITEM(mapping, i, PyLong_FromLong(m[i]));
        result = Py_BuildValue("iOLLN", f.best, f.optimal ? Py_True : Py_False, f.expanded, f.work, mapping);
    }
    free(m);
    return result;
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
    result = align_core(n1, n2, (const int32_t *)ub.buf, q, nq, (const int32_t *)c1b.buf, (const int32_t *)c2b.buf,
                        seed, restarts, budget, work_budget);
done:
    PyBuffer_Release(&ub); PyBuffer_Release(&qb); PyBuffer_Release(&c1b); PyBuffer_Release(&c2b);
    return result;
}

/* ---- encoding graphs and pairs in C (what smatch.py once did in Python per pair) ----------------------------
 *
 * encode(ids, norm_cache, eq_cache, variables, instances, attributes, relations) -> bytes
 *   One graph's Smatch features as int32s. Labels become ids of their normalised strings (lower-cased, trailing '_'
 *   removed, as smatch's normalize; an attribute's value prefixed with '='), interned in the dict `ids` shared by
 *   every graph a pair may meet; norm_cache / eq_cache map a raw string to its id, so each distinct string is
 *   normalised once. Layout: header (n, unary count, binary count, first instance's concept or -1), then unary
 *   features (kind, label, node, count) sorted, relations (node, node, role, count) in order of first occurrence,
 *   the relations' indices sorted by role, and each node's concept (its last instance) or -1.
 *   Unary features: (i, "i", concept), (i, role, "=" value) for attributes, (i, "s", role) for self-loops; equal
 *   features and equal relations are merged with their counts (a triple written twice matches at most as often as
 *   the other graph has it).
 * align_encoded(e1, e2, seed, restarts, node_budget, work_budget) -> (best, optimal, expanded, work)
 * pair_tables(e1, e2) -> (n1, n2, U, quads, conc1, conc2): the tables align() takes (what align_encoded searches). */

#include "../amr/_smatch_encoding.h"

/* node index of variable v, or -1 with KeyError (as the Python encoder's index[v]) */
static long node_of(PyObject *index, PyObject *v) {
    PyObject *i = PyDict_GetItemWithError(index, v);
    if (!i) {
        if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, v);
        return -1;
    }
    return PyLong_AsLong(i);
}

static PyObject *encode(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "encode(ids, norm_cache, eq_cache, variables, instances, attributes, "
                                         "relations) takes 7 arguments");
        return NULL;
    }
    PyObject *ids = args[0], *norm_cache = args[1], *eq_cache = args[2];
    if (!PyDict_Check(ids) || !PyDict_Check(norm_cache) || !PyDict_Check(eq_cache)) {
        PyErr_SetString(PyExc_TypeError, "encode: ids and caches must be dicts");
        return NULL;
    }
    PyObject *result = NULL, *index = NULL, *vars = NULL, *inst = NULL, *attr = NULL, *rel = NULL, *item = NULL;
    Raw4 *un = NULL, *bi = NULL;
    int32_t *concept = NULL;
    if (!(vars = PySequence_Fast(args[3], "encode: variables")) ||
        !(inst = PySequence_Fast(args[4], "encode: instances")) ||
        !(attr = PySequence_Fast(args[5], "encode: attributes")) ||
        !(rel = PySequence_Fast(args[6], "encode: relations")) || !(index = PyDict_New()))
        goto done;
    Py_ssize_t nv = PySequence_Fast_GET_SIZE(vars), ni = PySequence_Fast_GET_SIZE(inst);
    Py_ssize_t na = PySequence_Fast_GET_SIZE(attr), nr = PySequence_Fast_GET_SIZE(rel);
    for (Py_ssize_t k = 0; k < nv; k++) {
        PyObject *i = PyLong_FromSsize_t(k);
        if (!i || PyDict_SetItem(index, PySequence_Fast_GET_ITEM(vars, k), i) < 0) {
            Py_XDECREF(i);
            goto done;
        }
        Py_DECREF(i);
    }
    Py_ssize_t n = PyDict_GET_SIZE(index);
    if (n != nv) {
        PyErr_SetString(PyExc_ValueError, "encode: a variable occurs twice");
        goto done;
    }
    un = PyMem_Malloc(sizeof(Raw4) * (ni + na + nr + 1));
    bi = PyMem_Malloc(sizeof(Raw4) * (nr + 1));
    concept = PyMem_Malloc(sizeof(int32_t) * (n + 1));
    if (!un || !bi || !concept) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) concept[k] = -1;
    long kind_i = label_id(ids, norm_cache, STR_I, 0), kind_s = label_id(ids, norm_cache, STR_S, 0);
    if (kind_i < 0 || kind_s < 0) goto done;
    Py_ssize_t nu = 0, nb = 0;
    int32_t first = -1;
    for (Py_ssize_t k = 0; k < ni; k++) {
        if (!(item = PySequence_Fast(PySequence_Fast_GET_ITEM(inst, k), "encode: an instance"))) goto done;
        if (PySequence_Fast_GET_SIZE(item) != 2) {
            PyErr_SetString(PyExc_ValueError, "encode: an instance is (variable, concept)");
            goto done;
        }
        long i = node_of(index, PySequence_Fast_GET_ITEM(item, 0));
        long c = i < 0 ? -1 : label_id(ids, norm_cache, PySequence_Fast_GET_ITEM(item, 1), 0);
        if (c < 0) goto done;
        Py_CLEAR(item);
        if (first < 0) first = (int32_t)c;
        concept[i] = (int32_t)c;
        un[nu++] = (Raw4){(int32_t)kind_i, (int32_t)c, (int32_t)i, 0};
    }
    for (Py_ssize_t k = 0; k < na; k++) {
        if (!(item = PySequence_Fast(PySequence_Fast_GET_ITEM(attr, k), "encode: an attribute"))) goto done;
        if (PySequence_Fast_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_ValueError, "encode: an attribute is (variable, role, value)");
            goto done;
        }
        long i = node_of(index, PySequence_Fast_GET_ITEM(item, 0));
        long r = i < 0 ? -1 : label_id(ids, norm_cache, PySequence_Fast_GET_ITEM(item, 1), 0);
        long c = r < 0 ? -1 : label_id(ids, eq_cache, PySequence_Fast_GET_ITEM(item, 2), 1);
        if (c < 0) goto done;
        Py_CLEAR(item);
        un[nu++] = (Raw4){(int32_t)r, (int32_t)c, (int32_t)i, 0};
    }
    for (Py_ssize_t k = 0; k < nr; k++) {
        if (!(item = PySequence_Fast(PySequence_Fast_GET_ITEM(rel, k), "encode: a relation"))) goto done;
        if (PySequence_Fast_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_ValueError, "encode: a relation is (source, role, target)");
            goto done;
        }
        long i = node_of(index, PySequence_Fast_GET_ITEM(item, 0));
        long r = i < 0 ? -1 : label_id(ids, norm_cache, PySequence_Fast_GET_ITEM(item, 1), 0);
        long t = r < 0 ? -1 : node_of(index, PySequence_Fast_GET_ITEM(item, 2));
        if (t < 0) goto done;
        Py_CLEAR(item);
        if (i == t)
            un[nu++] = (Raw4){(int32_t)kind_s, (int32_t)r, (int32_t)i, 0};
        else {
            bi[nb] = (Raw4){(int32_t)i, (int32_t)t, (int32_t)r, (int32_t)nb};
            nb++;
        }
    }
    result = pack_encoding(n, un, nu, bi, nb, concept, first);
done:
    Py_XDECREF(vars); Py_XDECREF(inst); Py_XDECREF(attr); Py_XDECREF(rel); Py_XDECREF(item); Py_XDECREF(index);
    PyMem_Free(un); PyMem_Free(bi); PyMem_Free(concept);
    return result;
}

typedef struct {
    int32_t n, nu, nb, first;
    const int32_t *unary, *binary, *byrole, *concept;
} Enc;

/* The encoding at o (trusted: its header says its length) as an Enc. No Python API. */
static void enc_view(const int32_t *o, Enc *e) {
    e->n = o[H_N]; e->nu = o[H_NU]; e->nb = o[H_NB]; e->first = o[H_FIRST];
    e->unary = o + H_LEN; e->binary = e->unary + 4 * e->nu; e->byrole = e->binary + 4 * e->nb;
    e->concept = e->byrole + e->nb;
}

static int read_enc(PyObject *b, Enc *e) {
    if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) < (Py_ssize_t)(H_LEN * sizeof(int32_t))) {
        PyErr_SetString(PyExc_TypeError, "an encoded graph is the bytes encode() returns");
        return -1;
    }
    enc_view((const int32_t *)PyBytes_AS_STRING(b), e);
    if (e->n < 0 || e->nu < 0 || e->nb < 0 ||
        PyBytes_GET_SIZE(b) != (Py_ssize_t)(sizeof(int32_t) * (H_LEN + 4 * (size_t)e->nu + 5 * (size_t)e->nb + e->n))) {
        PyErr_SetString(PyExc_ValueError, "an encoded graph is the bytes encode() returns");
        return -1;
    }
    return 0;
}

typedef struct {
    int32_t *U, *q, *c1, *c2;
    Py_ssize_t nq;
} Tables;

static void free_tables(Tables *t) { free(t->U); free(t->q); free(t->c1); free(t->c2); }

/* first index in e's byrole whose relation has role >= r */
static int32_t role_start(const Enc *e, int32_t r) {
    int32_t lo = 0, hi = e->nb;
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (e->binary[4 * e->byrole[mid] + 2] < r) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static int cmp_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static uint64_t quad_hash(const int32_t *k) {
    uint64_t h = ((uint64_t)(uint32_t)k[0] << 32 | (uint32_t)k[1]) * 0x9E3779B97F4A7C15ULL;
    h ^= ((uint64_t)(uint32_t)k[2] << 32 | (uint32_t)k[3]) + 0x632BE59BD9B4E019ULL + (h << 6) + (h >> 2);
    h ^= h >> 31;
    return h * 0xBF58476D1CE4E5B9ULL;
}

/* U, quads (in the order the Python encoder made them) and concept ids of a pair; -1 if out of memory (no Python
 * API: align_many builds them on threads without the GIL) */
static int build_tables(const Enc *a, const Enc *b, Tables *t) {
    memset(t, 0, sizeof(*t));
    size_t cells = (size_t)a->n * (size_t)b->n;
    t->U = calloc(cells + 1, sizeof(int32_t));
    t->c1 = malloc(sizeof(int32_t) * (a->n + 1));
    t->c2 = malloc(sizeof(int32_t) * (b->n + 1));
    if (!t->U || !t->c1 || !t->c2) goto nomem;
    /* unary: merge join on (kind, label) */
    for (int32_t x = 0, y = 0; x < a->nu && y < b->nu;) {
        const int32_t *p = a->unary + 4 * x, *r = b->unary + 4 * y;
        if (p[0] != r[0] ? p[0] < r[0] : p[1] < r[1]) { x++; continue; }
        if (p[0] != r[0] || p[1] != r[1]) { y++; continue; }
        int32_t x_end = x, y_end = y;
        while (x_end < a->nu && a->unary[4 * x_end] == p[0] && a->unary[4 * x_end + 1] == p[1]) x_end++;
        while (y_end < b->nu && b->unary[4 * y_end] == p[0] && b->unary[4 * y_end + 1] == p[1]) y_end++;
        for (int32_t u = x; u < x_end; u++)
            for (int32_t v = y; v < y_end; v++) {
                int32_t c1 = a->unary[4 * u + 3], c2 = b->unary[4 * v + 3];
                t->U[(size_t)a->unary[4 * u + 2] * b->n + b->unary[4 * v + 2]] += c1 < c2 ? c1 : c2;
            }
        x = x_end; y = y_end;
    }
    /* quads: every relation of graph 1 against graph 2's relations with its role, equal quads merged */
    size_t total = 0;
    for (int32_t x = 0; x < a->nb; x++) {
        int32_t r = a->binary[4 * x + 2], s = role_start(b, r), e = role_start(b, r + 1);
        total += (size_t)(e - s);
    }
    /* Two quads are equal only if they come from relations of graph 1 between the same two nodes (the quad's first
     * and third nodes), and one relation's quads differ from each other (graph 2's relations are merged: no two
     * with the same nodes and role). So only the quads of relations that share their two nodes with another one
     * go through the hash table; the others are appended as they come: the same quads in the same order, without
     * a random memory access per quad (the table's cost on large graphs). */
    uint8_t *shared = calloc((size_t)a->nb + 1, 1);
    uint64_t *pairs = malloc(sizeof(uint64_t) * ((size_t)a->nb + 1));
    if (!shared || !pairs) { free(shared); free(pairs); goto nomem; }
    for (int32_t x = 0; x < a->nb; x++) {
        uint32_t i = (uint32_t)a->binary[4 * x], k = (uint32_t)a->binary[4 * x + 1];
        uint32_t lo = i < k ? i : k, hi = i < k ? k : i;
        pairs[x] = ((uint64_t)lo << 46) | ((uint64_t)hi << 28) | (uint64_t)x;  /* nodes < 2^18, relations < 2^28 */
    }
    int fits = a->n < (1 << 18) && a->nb < (1 << 28);
    if (fits) {
        qsort(pairs, (size_t)a->nb, sizeof(uint64_t), cmp_u64);
        for (int32_t x = 1; x < a->nb; x++)
            if (pairs[x] >> 28 == pairs[x - 1] >> 28)
                shared[pairs[x] & ((1u << 28) - 1)] = shared[pairs[x - 1] & ((1u << 28) - 1)] = 1;
    } else {
        memset(shared, 1, (size_t)a->nb);  /* (never on real graphs) every quad through the table */
    }
    free(pairs);
    size_t hashed = 0;
    for (int32_t x = 0; x < a->nb; x++)
        if (shared[x]) {
            int32_t r = a->binary[4 * x + 2];
            hashed += (size_t)(role_start(b, r + 1) - role_start(b, r));
        }
    size_t cap = 16;
    while (cap < 2 * hashed + 1) cap <<= 1;
    int32_t *slot = malloc(sizeof(int32_t) * cap);
    t->q = malloc(sizeof(int32_t) * (5 * total + 1));
    if (!slot || !t->q) { free(slot); free(shared); goto nomem; }
    memset(slot, 0xff, sizeof(int32_t) * cap);
    for (int32_t x = 0; x < a->nb; x++) {
        const int32_t *p = a->binary + 4 * x;
        int32_t i = p[0], k = p[1], r = p[2], c1 = p[3];
        for (int32_t z = role_start(b, r); z < b->nb && b->binary[4 * b->byrole[z] + 2] == r; z++) {
            const int32_t *g = b->binary + 4 * b->byrole[z];
            int32_t j = g[0], y = g[1], c2 = g[3], w = c1 < c2 ? c1 : c2;
            int32_t key[4];
            if (i < k) { key[0] = i; key[1] = j; key[2] = k; key[3] = y; }
            else { key[0] = k; key[1] = y; key[2] = i; key[3] = j; }
            if (!shared[x]) {
                int32_t *o = t->q + 5 * t->nq++;
                o[0] = key[0]; o[1] = key[1]; o[2] = key[2]; o[3] = key[3]; o[4] = w;
                continue;
            }
            size_t h = quad_hash(key) & (cap - 1);
            for (;;) {
                int32_t at = slot[h];
                if (at < 0) {
                    slot[h] = (int32_t)t->nq;
                    int32_t *o = t->q + 5 * t->nq++;
                    o[0] = key[0]; o[1] = key[1]; o[2] = key[2]; o[3] = key[3]; o[4] = w;
                    break;
                }
                int32_t *o = t->q + 5 * at;
                if (o[0] == key[0] && o[1] == key[1] && o[2] == key[2] && o[3] == key[3]) { o[4] += w; break; }
                h = (h + 1) & (cap - 1);
            }
        }
    }
    free(slot);
    free(shared);
    /* concepts: equal ids for equal concepts; a node without one gets what the Python encoder gave it */
    int32_t missing1 = a->first >= 0 ? a->first : (b->first >= 0 ? b->first : -2);
    for (int32_t i = 0; i < a->n; i++) t->c1[i] = a->concept[i] >= 0 ? a->concept[i] : missing1;
    for (int32_t j = 0; j < b->n; j++) t->c2[j] = b->concept[j];
    return 0;
nomem:
    free_tables(t);
    return -1;
}

/* The search on two encodings (their tables built, searched, freed); -1 if out of memory. No Python API: callers run
 * it without the GIL. */
static int align_pair(const Enc *a, const Enc *b, unsigned long long seed, int restarts, long long budget,
                      long long work_budget, Found *f) {
    Tables t;
    if (build_tables(a, b, &t) < 0) return -1;
    int rc = search(a->n, b->n, t.U, t.q, t.nq, t.c1, t.c2, seed, restarts, budget, work_budget, NULL, f);
    free_tables(&t);
    return rc;
}

static PyObject *align_encoded(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "align_encoded(e1, e2, seed, restarts, node_budget, work_budget)");
        return NULL;
    }
    Enc a, b;
    if (read_enc(args[0], &a) < 0 || read_enc(args[1], &b) < 0) return NULL;
    unsigned long long seed = PyLong_AsUnsignedLongLongMask(args[2]);
    long restarts = PyLong_AsLong(args[3]);
    long long budget = PyLong_AsLongLong(args[4]), work_budget = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred()) return NULL;
    Found f;
    int rc;
    /* the encodings are immutable bytes the caller holds: the search runs without the GIL, so threads scoring other
     * pairs (the aspects loop on several threads) go on meanwhile */
    Py_BEGIN_ALLOW_THREADS
    rc = align_pair(&a, &b, seed, (int)restarts, budget, work_budget, &f);
    Py_END_ALLOW_THREADS
    if (rc < 0) return PyErr_NoMemory();
    return Py_BuildValue("iOLL", f.best, f.optimal ? Py_True : Py_False, f.expanded, f.work);
}

static PyObject *pair_tables(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "pair_tables(e1, e2)");
        return NULL;
    }
    Enc a, b;
    if (read_enc(args[0], &a) < 0 || read_enc(args[1], &b) < 0) return NULL;
    Tables t;
    if (build_tables(&a, &b, &t) < 0) return PyErr_NoMemory();
    PyObject *result = Py_BuildValue("iiy#y#y#y#", a.n, b.n, (const char *)t.U,
                                     (Py_ssize_t)(sizeof(int32_t) * a.n * b.n), (const char *)t.q,
                                     (Py_ssize_t)(sizeof(int32_t) * 5 * t.nq), (const char *)t.c1,
                                     (Py_ssize_t)(sizeof(int32_t) * a.n), (const char *)t.c2,
                                     (Py_ssize_t)(sizeof(int32_t) * b.n));
    free_tables(&t);
    return result;
}


/* align_many(encodings 1, encodings 2, seed, restarts, node_budget, work_budget, threads) -> bytes
 *   align_encoded over aligned lists of encodings (one label table per pair), as one int64 record per pair:
 *   (best, optimal, work, nanoseconds the pair took), best -1 where its tables did not fit in memory.
 * align_texts(texts 1, texts 2, smatch, seed, restarts, node_budget, work_budget, threads) -> bytes
 *   the same from PENMAN texts, each pair read and encoded by _penman_reader's read_pair (a label table of its own)
 *   and aligned: records (best, optimal, work, nanoseconds reading and search took, triples 1, triples 2), best -2
 *   where the reader leaves the pair to the Python path (a text not ASCII, not str, or not one it reads: its error
 *   is the Python path's to give), -1 out of memory.
 * Both run without the GIL, on `threads` threads taking pairs in turn; each pair's result depends only on its two
 * graphs and the options, never on the threads. */
typedef struct {
    const Enc *a, *b;                      /* align_many */
    const char **text;                     /* align_texts: 2n texts (NULL: not ASCII str), lengths in len */
    const Py_ssize_t *len;
    const PairReader *reader;
    int smatch, width;                     /* width: int64s per record */
    int64_t *out;
    Py_ssize_t n;
    unsigned long long seed;
    int restarts;
    long long budget, work_budget;
    Py_ssize_t next;  /* the next pair to take (threads > 1: under the lock) */
#ifndef _WIN32
    pthread_mutex_t lock;
#endif
} Batch;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* pair k into its record; scratch: the reader's, one per thread (NULL for align_many) */
static void align_one(Batch *w, Py_ssize_t k, void *scratch) {
    int64_t t0 = now_ns(), *o = w->out + w->width * k;
    Enc texts[2];
    const Enc *a = w->a ? &w->a[k] : &texts[0], *b = w->b ? &w->b[k] : &texts[1];
    Found f;
    int rc = 1;
    if (w->reader) {
        const int32_t *enc[2];
        int32_t triples[2] = {0, 0};
        const char *t1 = w->text[2 * k], *t2 = w->text[2 * k + 1];
        rc = !scratch ? -1 : !t1 || !t2 ? 0 : w->reader->read_pair(scratch, t1, w->len[2 * k], t2, w->len[2 * k + 1],
                                                                   w->smatch, enc, triples);
        if (rc > 0) {
            enc_view(enc[0], &texts[0]);
            enc_view(enc[1], &texts[1]);
        }
        o[4] = triples[0];
        o[5] = triples[1];
    }
    if (rc > 0 && align_pair(a, b, w->seed, w->restarts, w->budget, w->work_budget, &f) < 0) rc = -1;
    if (rc <= 0) {
        o[0] = rc == 0 ? -2 : -1; o[1] = 0; o[2] = 0;
    } else {
        o[0] = f.best; o[1] = f.optimal; o[2] = f.work;
    }
    o[3] = now_ns() - t0;
}

static void *align_worker(void *arg) {
    Batch *w = arg;
    void *scratch = w->reader ? w->reader->scratch_new() : NULL;
    for (;;) {
        Py_ssize_t k;
#ifndef _WIN32
        pthread_mutex_lock(&w->lock);
        k = w->next++;
        pthread_mutex_unlock(&w->lock);
#else
        k = w->next++;
#endif
        if (k >= w->n) break;
        align_one(w, k, scratch);
    }
    if (scratch) w->reader->scratch_free(scratch);
    return NULL;
}

/* Runs the batch on `threads` threads (this one among them); the caller has released the GIL. */
static void run_batch(Batch *w, long threads) {
    if (threads > w->n) threads = (long)w->n;
#ifndef _WIN32
    pthread_t ids[64];
    int started = 0;
    if (threads > 64) threads = 64;
    pthread_mutex_init(&w->lock, NULL);
    for (; started < threads - 1; started++)
        if (pthread_create(&ids[started], NULL, align_worker, w) != 0) break;
    align_worker(w);  /* this thread takes pairs too; a thread that did not start leaves its share to the rest */
    for (int t = 0; t < started; t++) pthread_join(ids[t], NULL);
    pthread_mutex_destroy(&w->lock);
#else
    align_worker(w);
#endif
}

/* The options both take after the pairs: seed, restarts, node_budget, work_budget, threads. */
static int batch_options(Batch *w, PyObject *const *args, long *threads) {
    w->seed = PyLong_AsUnsignedLongLongMask(args[0]);
    long restarts = PyLong_AsLong(args[1]);
    w->budget = PyLong_AsLongLong(args[2]);
    w->work_budget = PyLong_AsLongLong(args[3]);
    *threads = PyLong_AsLong(args[4]);
    w->restarts = (int)restarts;
    return PyErr_Occurred() ? -1 : 0;
}

/* The two lists of a batch, checked and copied (the threads read their items while other threads may run Python). */
static int batch_lists(PyObject *const *args, const char *name, const char *usage, PyObject **hold1, PyObject **hold2,
                       Py_ssize_t *n) {
    if (!PyList_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    *n = PyList_GET_SIZE(args[0]);
    if (PyList_GET_SIZE(args[1]) != *n) {
        PyErr_Format(PyExc_ValueError, "%s: the two lists differ in length", name);
        return -1;
    }
    *hold1 = PyList_GetSlice(args[0], 0, *n);
    *hold2 = *hold1 ? PyList_GetSlice(args[1], 0, *n) : NULL;
    return *hold2 ? 0 : -1;
}

#define ALIGN_MANY_DOC "align_many(list of e1, list of e2, seed, restarts, node_budget, work_budget, threads)"

static PyObject *align_many(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, ALIGN_MANY_DOC);
        return NULL;
    }
    Batch w;
    memset(&w, 0, sizeof(w));
    PyObject *hold1 = NULL, *hold2 = NULL, *result = NULL;
    Enc *encs = NULL;
    long threads;
    Py_ssize_t n;
    if (batch_lists(args, "align_many", ALIGN_MANY_DOC, &hold1, &hold2, &n) < 0 || batch_options(&w, args + 2, &threads) < 0)
        goto fail;
    w.n = n;
    w.width = 4;
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 * sizeof(int64_t)) * n);
    encs = PyMem_Malloc(sizeof(Enc) * (2 * (size_t)n + 1));
    if (!result || !encs) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < n; k++)
        if (read_enc(PyList_GET_ITEM(hold1, k), &encs[k]) < 0 || read_enc(PyList_GET_ITEM(hold2, k), &encs[n + k]) < 0)
            goto fail;
    w.a = encs; w.b = encs + n;
    w.out = (int64_t *)PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    run_batch(&w, threads);
    Py_END_ALLOW_THREADS
    PyMem_Free(encs);
    Py_DECREF(hold1); Py_DECREF(hold2);
    return result;
fail:
    Py_XDECREF(result); PyMem_Free(encs); Py_XDECREF(hold1); Py_XDECREF(hold2);
    return NULL;
}

#define ALIGN_TEXTS_DOC "align_texts(list of text1, list of text2, smatch, seed, restarts, node_budget, " \
                        "work_budget, threads) -> bytes of int64 (best, optimal, work, ns, triples 1, triples 2) per " \
                        "pair; best -2: the Python path reads the pair, -1: out of memory"

static const PairReader *pair_reader;

static PyObject *align_texts(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, ALIGN_TEXTS_DOC);
        return NULL;
    }
    if (!pair_reader && !(pair_reader = PyCapsule_Import(PAIR_READER_CAPSULE, 0))) return NULL;
    Batch w;
    memset(&w, 0, sizeof(w));
    PyObject *hold1 = NULL, *hold2 = NULL, *result = NULL;
    const char **text = NULL;
    Py_ssize_t *len = NULL, n;
    long threads;
    if (batch_lists(args, "align_texts", ALIGN_TEXTS_DOC, &hold1, &hold2, &n) < 0 || (w.smatch = PyObject_IsTrue(args[2])) < 0 ||
        batch_options(&w, args + 3, &threads) < 0)
        goto fail;
    w.n = n;
    w.width = 6;
    w.reader = pair_reader;
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(6 * sizeof(int64_t)) * n);
    text = PyMem_Malloc(sizeof(char *) * (2 * (size_t)n + 1));
    len = PyMem_Malloc(sizeof(Py_ssize_t) * (2 * (size_t)n + 1));
    if (!result || !text || !len) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < 2 * n; k++) {  /* str objects are immutable: their ASCII bytes stay as read here */
        PyObject *t = PyList_GET_ITEM(k % 2 ? hold2 : hold1, k / 2);
        int ascii = PyUnicode_Check(t) && PyUnicode_IS_ASCII(t);
        text[k] = ascii ? (const char *)PyUnicode_DATA(t) : NULL;
        len[k] = ascii ? PyUnicode_GET_LENGTH(t) : 0;
    }
    w.text = text;
    w.len = len;
    w.out = (int64_t *)PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    run_batch(&w, threads);
    Py_END_ALLOW_THREADS
    PyMem_Free(text); PyMem_Free(len);
    Py_DECREF(hold1); Py_DECREF(hold2);
    return result;
fail:
    Py_XDECREF(result); PyMem_Free(text); PyMem_Free(len); Py_XDECREF(hold1); Py_XDECREF(hold2);
    return NULL;
}

#define ENCODE_DOC "encode(ids, norm_cache, eq_cache, variables, instances, attributes, relations) -> bytes"
#define ALIGN_ENCODED_DOC "align_encoded(e1, e2, seed, restarts, node_budget, work_budget) -> (best, optimal, " \
                          "expanded, work)"
#define PAIR_TABLES_DOC "pair_tables(e1, e2) -> (n1, n2, U, quads, conc1, conc2)"

static PyMethodDef methods[] = {
    {"align", align, METH_VARARGS,
     "align(n1, n2, U, quads, conc1, conc2, seed, restarts, node_budget, work_budget)"
     " -> (best, optimal, expanded, work, mapping)"},
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL, ENCODE_DOC},
    {"align_encoded", (PyCFunction)(void (*)(void))align_encoded, METH_FASTCALL, ALIGN_ENCODED_DOC},
    {"pair_tables", (PyCFunction)(void (*)(void))pair_tables, METH_FASTCALL, PAIR_TABLES_DOC},
    {"align_many", (PyCFunction)(void (*)(void))align_many, METH_FASTCALL,
     ALIGN_MANY_DOC " -> bytes of int64 (best, optimal, work, ns) per pair"},
    {"align_texts", (PyCFunction)(void (*)(void))align_texts, METH_FASTCALL, ALIGN_TEXTS_DOC},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_smatch_core", "Smatch alignment search in C.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__smatch_core(void) {
    if (encoding_init() < 0) return NULL;
    return PyModule_Create(&module);
}
