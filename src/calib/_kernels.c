/* calib's compiled inner loops (module calib._kernels): a vectorised log, and a vectorised exp for
 * non-positive arguments; built on the exp, the row softmax and the tempered moments (calib.core.numerics) and SelectTau's
 * per-row search (the ATS-CP paper, algorithm 2; calib.calibrators.select_tau describes the algorithm and
 * holds its settings), the conformal scores of every class from a ranking of the row, MR's in/out update, and
 * the equal-width bin counts behind the binned metrics (one pass instead of NumPy's index array and three
 * bincounts), and the per-row passes of the evaluation's cumulative-mass metrics: the running sums of a
 * sorted row, the label's rank, and how many masses fall below or up to a band's edges.
 *
 * Why compiled: NumPy's float64 exp is scalar on CPUs without AVX-512 (6.5-8 ns a value here), and
 * an iterative search over an N x K matrix in NumPy is several passes over memory per iteration.
 * Here exp is a Cody-Waite reduction plus a degree-13 Taylor polynomial on GCC's generic vectors
 * (1-2 ns a value), and a SelectTau row's work stays in three K-length buffers (cache-resident at
 * K = 1,000): each Newton evaluation is one fused exp-and-sum pass. On x86-64 Linux with GCC the row
 * loops are compiled twice, for x86-64-v3 (AVX2 + FMA) and baseline x86-64, and the loader picks one
 * per machine. Rows are independent and every sum is taken in a fixed order, so the output does not
 * depend on how the caller splits rows into calls or threads. The GIL is released while rows run.
 *
 * SelectTau, per row with centred scores c = u - max u, in-set mask C and target t: beta solves
 *     M(beta) = sum_{y in C} softmax(beta c)_y = t
 * by Newton steps on g(beta) = log S_in(beta) - log S_out(beta), g'(beta) = E_in[c] - E_out[c],
 * S = sum exp(beta c), safeguarded by the bracket [beta_lo, beta_hi] (geometric bisection when a step
 * leaves it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Row categories: the codes of calib.calibrators.conformal (FEASIBLE, EMPTY, FULL, TOO_LARGE, UNREACHABLE). */
enum { FEASIBLE = 0, EMPTY = 1, FULL = 2, TOO_LARGE = 3, UNREACHABLE = 4 };

typedef struct {
    double beta_min, beta_max, mass_tol, rel_width;
    long max_iterations;
} Settings;

typedef struct {
    double in, out, weighted_in, weighted_out; /* S_in, S_out, sum_in w c, sum_out w c */
} Sums;

#if defined(__GNUC__) /* GCC and Clang */
#pragma GCC diagnostic ignored "-Wpsabi" /* 32-byte vectors pass between inlined helpers only */
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define MULTIVERSION __attribute__((target_clones("arch=x86-64-v3", "default"), flatten))
#else
#define MULTIVERSION
#endif

#define LN2_HI 6.93147180369123816490e-01 /* fdlibm's split of log 2: n * LN2_HI is exact for |n| < 2^21 */
#define LN2_LO 1.90821492927058770002e-10
#define LOG2_E 1.44269504088896338700e+00
#define ROUNDING_SHIFT 6755399441055744.0 /* 1.5 * 2^52: x + shift rounds x to an integer in the low bits */
#define EXP_FLOOR (-746.0)                /* below it the result is 0, as in the C library (true value < 2^-1076) */
#define SUBNORMAL_N (-1000.0)             /* 2^n below 2^-1000: built as 2^(n + 64), the product then scaled by 2^-64 */
#define PAD_SCORE (-1e300)                /* row buffers are padded to whole vectors: weight 0, outside the set */

/* Four doubles at a time through GCC's generic vectors (AVX2 registers in the x86-64-v3 clone, pairs of
 * SSE2 registers in the baseline one). Comparisons give lane masks of all ones or zeros. */
#define W 4 /* splat, lane_sum, lane_max and the mask load in solve_row spell out four lanes */
typedef double vec __attribute__((vector_size(W * sizeof(double))));
typedef int64_t lanes __attribute__((vector_size(W * sizeof(double))));

/* Row buffers are padded to whole vectors. */
static inline Py_ssize_t padded_length(Py_ssize_t k) { return (k + W - 1) / W * W; }

static inline vec splat(double x) { return (vec){x, x, x, x}; }
static inline vec load(const double *p) { vec v; memcpy(&v, p, sizeof v); return v; }
static inline void store(double *p, vec v) { memcpy(p, &v, sizeof v); }
static inline vec pick(lanes mask, vec yes, vec no) { return (vec)(((lanes)yes & mask) | ((lanes)no & ~mask)); }
static inline double lane_sum(vec v) { return (v[0] + v[1]) + (v[2] + v[3]); }
static inline double lane_max(vec v) { return fmax(fmax(v[0], v[1]), fmax(v[2], v[3])); }

/* exp(x) for x <= 0 (x = -inf gives 0), relative error a few ulp: x = n log 2 + r, |r| <= log(2) / 2,
 * exp(r) by its Taylor polynomial of degree 13 (truncation < 5e-18), times 2^n built in the exponent
 * bits. Results below the smallest normal number (x < -708.4) are subnormal, as NumPy's and the C
 * library's: for n < -1000 the polynomial is multiplied by 2^(n + 64) (exact) and then by 2^-64, the one
 * rounding to the subnormal's precision; below -746 (true value < 2^-1076) the result is 0. */
static inline vec exp_nonpositive(vec x)
{
    lanes below = x < splat(EXP_FLOOR);
    vec clamped = pick(below, splat(EXP_FLOOR), x);
    vec shifted = clamped * LOG2_E + ROUNDING_SHIFT;
    vec n = shifted - ROUNDING_SHIFT;
    vec r = clamped - n * LN2_HI;
    r = r - n * LN2_LO;
    vec p = splat(1.0 / 6227020800.0);
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    lanes subnormal = n < splat(SUBNORMAL_N);                    /* all ones where true */
    lanes scale = ((lanes)shifted + 1023 + (subnormal & 64)) << 52; /* the low bits of shifted hold n (two's complement) */
    vec result = p * (vec)scale;
    result = pick(subnormal, result * 0x1p-64, result);
    return pick(below, splat(0.0), result);
}

#define SQRT2 1.41421356237309514547e+00

/* log(x) for normal positive finite x, fdlibm's e_log.c on four lanes (error below 1 ulp):
 * x = 2^e m with m in [sqrt(2)/2, sqrt(2)), f = m - 1, s = f / (2 + f), and
 * log m = f - (f^2/2 - s (f^2/2 + R(s^2))) with fdlibm's minimax R; log x = e log 2 + log m with
 * log 2 split in two (LN2_HI, LN2_LO). Other lanes are the caller's job (log_values). */
static inline vec log_normal(vec x)
{
    lanes bits = (lanes)x;
    vec m = (vec)((bits & 0x000fffffffffffffLL) | 0x3ff0000000000000LL); /* [1, 2) */
    lanes high = m > SQRT2;
    m = pick(high, m * 0.5, m);
    /* e = biased exponent - 1023 (+1 when m was halved), made a double exactly: added to the bits of
     * 1.5 * 2^52 (spacing 1 in its binade, whatever the sign of e), then the shift taken off */
    lanes exponent = ((bits >> 52) & 0x7ff) - 1023 - high; /* high is -1 (all ones) where true */
    vec e = (vec)(exponent + (lanes)splat(ROUNDING_SHIFT)) - ROUNDING_SHIFT;
    vec f = m - 1.0, s = f / (f + 2.0), z = s * s, w = z * z;
    vec t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01));
    vec t2 = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01
                   + w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
    vec half_square = 0.5 * f * f;
    return e * LN2_HI - ((half_square - (s * (half_square + t1 + t2) + e * LN2_LO)) - f);
}

/* out = log(max(x + shift, floor)) of n values; lanes that are not normal positive finite numbers
 * after the shift and floor (0, subnormal, negative, inf, NaN) take the C library's log. */
MULTIVERSION
static void log_values(const double *x, Py_ssize_t n, double shift, double floor, double *out)
{
    Py_ssize_t j = 0;
    for (; j + W <= n; j += W) {
        vec v = load(x + j) + shift;
        v = pick(v < floor, splat(floor), v); /* NaN stays NaN, as np.maximum keeps it */
        lanes normal = (v >= DBL_MIN) & (v <= DBL_MAX);
        if ((normal[0] & normal[1] & normal[2] & normal[3]) != 0) {
            store(out + j, log_normal(v));
        } else {
            for (int lane = 0; lane < W; lane++)
                out[j + lane] = log(v[lane]);
        }
    }
    for (; j < n; j++) {
        double v = x[j] + shift;
        out[j] = log(v < floor ? floor : v);
    }
}

/* The largest and smallest value of a row. */
static inline void row_range(const double *u, Py_ssize_t k, double *top, double *lowest)
{
    vec top_v = splat(-INFINITY), low_v = splat(INFINITY);
    Py_ssize_t j = 0;
    for (; j + W <= k; j += W) {
        vec values = load(u + j);
        top_v = pick(values > top_v, values, top_v);
        low_v = pick(values < low_v, values, low_v);
    }
    *top = lane_max(top_v);
    *lowest = -lane_max(-low_v);
    for (; j < k; j++) {
        *top = fmax(*top, u[j]);
        *lowest = fmin(*lowest, u[j]);
    }
}

/* c = z - max z, padded to whole vectors; returns max z. */
static inline double centre_row(const double *z, Py_ssize_t k, double *c)
{
    double top, lowest;
    row_range(z, k, &top, &lowest);
    Py_ssize_t j = 0;
    for (; j < k; j++)
        c[j] = z[j] - top;
    for (; j < padded_length(k); j++)
        c[j] = PAD_SCORE;
    return top;
}

/* softmax(z) of one row into probs and, when given, log_probs = (z - max z) - log S; c and w are
 * padded scratch rows. */
static void softmax_row(const double *z, Py_ssize_t k, double *c, double *w, double *probs, double *log_probs)
{
    Py_ssize_t padded = padded_length(k), j;
    centre_row(z, k, c);
    vec total_v = splat(0.0);
    for (j = 0; j < padded; j += W) {
        vec weight = exp_nonpositive(load(c + j));
        store(w + j, weight);
        total_v += weight;
    }
    double total = lane_sum(total_v), log_total = log(total);
    for (j = 0; j + W <= k; j += W) {
        if (probs != NULL)
            store(probs + j, load(w + j) / total);
        if (log_probs != NULL)
            store(log_probs + j, load(c + j) - log_total);
    }
    for (; j < k; j++) {
        if (probs != NULL)
            probs[j] = w[j] / total;
        if (log_probs != NULL)
            log_probs[j] = c[j] - log_total;
    }
}

MULTIVERSION
static void softmax_rows(const double *z, Py_ssize_t n, Py_ssize_t k, double *probs, double *log_probs, double *scratch)
{
    Py_ssize_t padded = padded_length(k);
    for (Py_ssize_t i = 0; i < n; i++)
        softmax_row(z + i * k, k, scratch, scratch + padded, probs == NULL ? NULL : probs + i * k,
                    log_probs == NULL ? NULL : log_probs + i * k);
}

/* Mean and variance of z under softmax(beta z), beta > 0, for each row: one fused pass of
 * w = exp(beta (z - max z)) and the sums of w, w c and w c^2 (temperature scaling's NLL gradient
 * mean_i E[z_i] - z_{i,y_i} and curvature mean_i Var[z_i]). */
MULTIVERSION
static void moments_rows(const double *z, Py_ssize_t n, Py_ssize_t k, double beta, double *mean, double *variance,
                         double *c)
{
    Py_ssize_t padded = padded_length(k);
    for (Py_ssize_t i = 0; i < n; i++) {
        double top = centre_row(z + i * k, k, c);
        vec total = splat(0.0), first = splat(0.0), second = splat(0.0);
        for (Py_ssize_t j = 0; j < padded; j += W) {
            vec centred = load(c + j), weight = exp_nonpositive(centred * beta);
            vec weighted = weight * centred; /* (w c) c, never w (c c): a pad's c^2 overflows */
            total += weight;
            first += weighted;
            second += weighted * centred;
        }
        double sum = lane_sum(total), shift = lane_sum(first) / sum;
        mean[i] = top + shift;
        variance[i] = lane_sum(second) / sum - shift * shift;
    }
}

/* One Newton evaluation over a padded row: w = exp(beta c) and its four sums, in one pass. The sums
 * are four lanes added in a fixed order at the end: the same bytes on every run. */
static inline Sums weights_and_sums(const double *c, const double *m, double beta, Py_ssize_t padded, double *w)
{
    vec s_in = splat(0.0), s_out = splat(0.0), a_in = splat(0.0), a_out = splat(0.0);
    for (Py_ssize_t j = 0; j < padded; j += W) {
        vec centred = load(c + j), weight = exp_nonpositive(centred * beta);
        vec inside = weight * load(m + j), outside = weight - inside; /* m is 0 or 1: exact */
        store(w + j, weight);
        s_in += inside;
        s_out += outside;
        a_in += inside * centred;
        a_out += outside * centred;
    }
    return (Sums){lane_sum(s_in), lane_sum(s_out), lane_sum(a_in), lane_sum(a_out)};
}

static inline double logit(double p) { return log(p) - log1p(-p); }

/* The Newton search on one feasible row whose target lies inside the bracket. Returns beta; *have
 * says whether w holds exp(beta c) with *sums its sums (the pass that verified the row's mass). */
static double newton(const double *c, const double *m, Py_ssize_t padded, double target, const Settings *s,
                     double *w, Sums *sums, int *have)
{
    /* Newton aims at the middle of the accepted band [target, target + mass_tol]: a converged
     * iterate then lands inside the band from either side. */
    double logit_target = logit(target), logit_aim = logit(target + s->mass_tol / 2);
    double lo = s->beta_min, hi = s->beta_max, beta = 1.0;
    for (long iteration = 0; iteration < s->max_iterations; iteration++) {
        *sums = weights_and_sums(c, m, beta, padded, w);
        double log_odds = log(sums->in) - log(sums->out); /* S_out = 0 gives +inf */
        double mass = sums->in / (sums->in + sums->out);
        int above = log_odds >= logit_target;
        if (above)
            hi = beta;
        else
            lo = beta;
        if (above && mass - target <= s->mass_tol) {
            *have = 1;
            return beta;
        }
        if (hi - lo <= s->rel_width * lo) {
            *have = above; /* beta == hi exactly when this pass was above */
            return hi;
        }
        double slope = sums->weighted_in / sums->in - sums->weighted_out / sums->out;
        double step = beta - (log_odds - logit_aim) / slope;
        beta = (isfinite(step) && step > lo && step < hi) ? step : sqrt(lo * hi);
    }
    *have = 0;
    return hi;
}

static double mass_at(const double *c, const double *m, Py_ssize_t padded, double beta, double *w, Sums *sums)
{
    *sums = weights_and_sums(c, m, beta, padded, w);
    return sums->in / (sums->in + sums->out);
}

/* One row: its category, its beta, and optionally softmax(beta u) (or its log) in ``dist``. */
static void solve_row(const double *u, const uint8_t *in_set, double target, Py_ssize_t k, const Settings *s,
                      double *c, double *m, double *w, double *beta_out, int8_t *category_out, double *dist,
                      int log_space)
{
    /* c = u - max u and m = the mask as 0/1, padded to whole vectors; what the bracket bounds need:
     * the set size, min c and the largest c inside and outside the set. */
    Py_ssize_t padded = padded_length(k), j;
    double top, lowest;
    row_range(u, k, &top, &lowest);
    lowest -= top;
    vec size_v = splat(0.0), inside_v = splat(-INFINITY), outside_v = splat(-INFINITY);
    for (j = 0; j < padded; j += W) {
        vec centred = splat(PAD_SCORE), mask = splat(0.0);
        if (j + W <= k) {
            centred = load(u + j) - top;
            mask = (vec){in_set[j], in_set[j + 1], in_set[j + 2], in_set[j + 3]}; /* bools: 0 or 1 */
        } else {
            for (Py_ssize_t t = j; t < k; t++) {
                centred[t - j] = u[t] - top;
                mask[t - j] = in_set[t];
            }
        }
        store(c + j, centred);
        store(m + j, mask);
        lanes in = mask > 0.0;
        size_v += mask;
        inside_v = pick(in & (centred > inside_v), centred, inside_v);
        outside_v = pick(~in & (centred > outside_v), centred, outside_v);
    }
    Py_ssize_t size = (Py_ssize_t)lane_sum(size_v);
    double top_inside = lane_max(inside_v), top_outside = lane_max(outside_v);
    int8_t category = FEASIBLE;
    double beta = 1.0;
    int have = 0;
    Sums sums;
    if (size == 0) {
        category = EMPTY; /* the caller keeps such rows unchanged; beta = 1 */
    } else if (size == k) {
        category = FULL;
    } else {
        /* The bracket ends. Exact bounds settle most rows without an exp pass: with w = exp(beta c) <= 1,
         *   M(beta) <= k_in / (k_in + k_out exp(beta min c))          (S_in <= k_in, S_out >= k_out e^{beta min c})
         *   M(beta) >= 1 / (1 + k_out exp(beta max_{not C} c))      when the row maximum is in C (S_in >= 1). */
        double k_in = (double)size, k_out = (double)(k - size);
        if (k_in / (k_in + k_out * exp(s->beta_min * lowest)) >= target
            && mass_at(c, m, padded, s->beta_min, w, &sums) >= target) {
            category = TOO_LARGE; /* even the flattest end keeps >= target in the set */
            beta = s->beta_min;
            have = 1;
        } else if ((top_inside < 0.0 || 1.0 / (1.0 + k_out * exp(s->beta_max * top_outside)) < target)
                   && mass_at(c, m, padded, s->beta_max, w, &sums) < target) {
            category = UNREACHABLE; /* even the sharpest end stays below the target */
            beta = s->beta_max;
            have = 1;
        } else {
            beta = newton(c, m, padded, target, s, w, &sums, &have);
        }
    }
    *beta_out = beta;
    *category_out = category;
    if (dist == NULL)
        return;
    if (!have)
        sums = weights_and_sums(c, m, beta, padded, w);
    double total = sums.in + sums.out, log_total = log(total);
    j = 0;
    for (; j + W <= k; j += W)
        store(dist + j, log_space ? load(c + j) * beta - log_total : load(w + j) / total);
    for (; j < k; j++)
        dist[j] = log_space ? c[j] * beta - log_total : w[j] / total;
}

MULTIVERSION
static void solve_rows(const double *scores, const uint8_t *in_set, const double *target, Py_ssize_t n,
                       Py_ssize_t k, const Settings *s, double *beta, int8_t *category, double *dist,
                       int log_space, double *scratch)
{
    Py_ssize_t padded = padded_length(k);
    double *c = scratch, *m = scratch + padded, *w = scratch + 2 * padded;
    for (Py_ssize_t i = 0; i < n; i++)
        solve_row(scores + i * k, in_set + i * k, target[i], k, s, c, m, w, beta + i, category + i,
                  dist == NULL ? NULL : dist + i * k, log_space);
}

/* Conformal scores by rank (calib.calibrators.conformal): per row, with ``ranking`` the row's columns
 * sorted by non-increasing probability (each entry's column in the bits under ``column_mask``; the
 * bits above may hold a sort key), the score of the class at rank r (0-based) is
 *     base_r + table[r],  base_r = p_(0) + ... + p_(r) (CUMULATIVE), p_(0) (TOP) or 0 (NO_BASE),
 * written at the class's own column. A row is flagged when the ranking is not exactly the one
 * wanted, non-increasing with equal probabilities in column order (the caller ranks those rows
 * again, stably). The sum runs from rank 0 up, as NumPy's cumsum does, and the table is added
 * afterwards, so the scores equal calib.core.kernels.by_rank_values' to the bit (there is no product a
 * fused multiply-add could round differently). Why compiled: a row's gather, sums and scatter stay
 * in cache in one pass, where NumPy makes three passes over memory and builds index arrays. */
enum { CUMULATIVE = 0, TOP = 1, NO_BASE = 2 };

static int rank_scores_rows(const double *probs, const uint64_t *ranking, uint64_t column_mask, Py_ssize_t n,
                            Py_ssize_t k, int base, const double *table, double *out, uint8_t *misranked)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        const double *p = probs + i * k;
        const uint64_t *o = ranking + i * k;
        double *v = out + i * k;
        double sum = 0.0, previous = 0.0, top = 0.0;
        uint64_t previous_column = 0;
        uint8_t wrong = 0;
        for (Py_ssize_t r = 0; r < k; r++) {
            uint64_t column = o[r] & column_mask;
            if (column >= (uint64_t)k)
                return 0;
            double value = p[column];
            if (r == 0)
                top = sum = value;
            else {
                wrong |= value > previous || (value == previous && column < previous_column);
                sum += value;
            }
            previous = value;
            previous_column = column;
            double score = base == CUMULATIVE ? sum : base == TOP ? top : 0.0;
            v[column] = table == NULL ? score : (base == NO_BASE ? table[r] : score + table[r]);
        }
        misranked[i] = wrong;
    }
    return 1;
}

/* MR's update (calib.calibrators.conformal_mass): per row, values = values (+ or *) (inside if the class
 * is in the set, else outside); one operation per value, so the same bits as NumPy's where-then-op. */
static void set_update_rows(double *values, const uint8_t *in_set, const double *inside, const double *outside,
                            Py_ssize_t n, Py_ssize_t k, int add)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        double *v = values + i * k;
        const uint8_t *m = in_set + i * k;
        double a = inside[i], b = outside[i];
        if (add)
            for (Py_ssize_t j = 0; j < k; j++)
                v[j] += m[j] ? a : b;
        else
            for (Py_ssize_t j = 0; j < k; j++)
                v[j] *= m[j] ? a : b;
    }
}

/* The equal-width bin of v (calib.core.numerics.bin_index): b = min((int32)(v s), B - 1), s = B (1 + r) passed
 * in as scale, r the relative edge tolerance: one rounding, as in NumPy. */
static inline int32_t bin_of(double v, double scale, int n_bins)
{
    int32_t b = (int32_t)(v * scale);
    return b > n_bins - 1 ? n_bins - 1 : b;
}

/* One row's values in the first bin added into sum0 (k numbers: the value, or +0.0, which leaves a sum's bits as
 * they are), and into plain_sum0 too unless it is NULL (the plain sums over every row beside a cluster's);
 * returns whether any value lies in another bin. The first bin's counts need no pass of their own: they are the
 * rows less the values elsewhere, which are few and counted where they are found. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
MULTIVERSION
static int first_bin_row(const double *restrict v, double *restrict sum0, double *restrict plain_sum0, Py_ssize_t k,
                         double scale, int n_bins)
{
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    int elsewhere = 0;
    for (Py_ssize_t j = 0; j < k; j++) {
        const int first = bin_of(v[j], scale, n_bins) == 0;
        const double value = first ? v[j] : 0.0;
        sum0[j] += value;
        if (plain_sum0 != NULL)
            plain_sum0[j] += value;
        elsewhere |= !first;
    }
    return elsewhere;
}

/* A first bin kept apart over n rows, added into the first bin of each of k groups of count and sum (n_bins
 * each): apart holds the k groups' sums (added from zero) and then their values elsewhere, so each first bin
 * gains n less those (exact) and its sum (0 + s = s where it was empty: the bits of adding each value in turn). */
static void add_first_bin(double *count, double *sum, const double *apart, Py_ssize_t k, int n_bins, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < k; j++) {
        count[j * (Py_ssize_t)n_bins] += (double)n - apart[k + j];
        sum[j * (Py_ssize_t)n_bins] += apart[j];
    }
}

/* A run of consecutive values in one bin: the bin (-1 before the first value), its sum so far (the
 * bin's sum before the run, then each value added in turn) and its count and hits since the run began. */
typedef struct {
    Py_ssize_t bin;
    double sum;
    int64_t count, hits;
} Run;

/* Store the run's sum, count and hits in its bin. */
static inline void run_end(const Run *run, double *count, double *sum, double *hit)
{
    if (run->bin >= 0) {
        sum[run->bin] = run->sum;
        count[run->bin] += (double)run->count;
        hit[run->bin] += (double)run->hits;
    }
}

/* Add value v (a hit or not) in bin b: to the run, or ending it and starting b's. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static inline __attribute__((always_inline)) void run_add(Run *run, Py_ssize_t b, double v, int is_hit, double *count, double *sum, double *hit)
{
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    if (b != run->bin) {
        run_end(run, count, sum, hit);
        run->bin = b;
        run->sum = sum[b];
        run->count = run->hits = 0;
    }
    run->count += 1;
    run->sum += v;
    run->hits += is_hit;
}

/* Group 0 of bin_counts_rows with its hits given or none: each value added to its bin's run, and with ``both`` to
 * the plain run too. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static inline __attribute__((always_inline)) void group_runs(const double *values, const uint8_t *hits,
                              const int64_t *row_cluster, Py_ssize_t n, Py_ssize_t k,
                              int n_bins, double scale, Py_ssize_t clusters, double *count, double *sum, double *hit,
                              double *plain_count, double *plain_sum, double *plain_hit, const int both)
{
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    Run run = {-1, 0.0, 0, 0}, plain_run = {-1, 0.0, 0, 0};
    for (Py_ssize_t t = 0; t < n; t++) {
        const double *v = values + t * k;
        const uint8_t *h = hits != NULL ? hits + t * k : NULL;
        const Py_ssize_t cluster = row_cluster != NULL ? (Py_ssize_t)row_cluster[t] : 0;
        for (Py_ssize_t j = 0; j < k; j++) {
            const Py_ssize_t b = (Py_ssize_t)bin_of(v[j], scale, n_bins);
            const int is_hit = h != NULL && h[j] != 0;
            run_add(&run, b * clusters + cluster, v[j], is_hit, count, sum, hit);
            if (both)
                run_add(&plain_run, b, v[j], is_hit, plain_count, plain_sum, plain_hit);
        }
    }
    run_end(&run, count, sum, hit);
    if (both)
        run_end(&plain_run, plain_count, plain_sum, plain_hit);
}

/* Group 0 with each row's hits from first_hit on (rows of cumulative masses, which stay in each bin for a run of
 * values): a row taken run by run, each value added to the run's sum (the cluster's bin sum, and beside it the
 * plain run's where plain_sum is given) and nothing else; the run's count is its length, its hits its positions
 * at or after the row's first hit, added once it ends. Each bin's values are added in element order, as
 * group_runs adds them (a plain run that goes on into the next row stays in its register; a cluster's sum is
 * stored at a run's end and loaded at the next: the same bits), with a value's work down to its bin and its
 * sums, so that the two sums' chains of additions overlap: 1.2 against 1.7 us a row of 1,000 masses here. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static void first_hit_runs(const double *values, const int64_t *first_hit, const int64_t *row_cluster, Py_ssize_t n,
                           Py_ssize_t k, int n_bins, double scale, Py_ssize_t clusters, double *count, double *sum,
                           double *hit, double *plain_count, double *plain_sum, double *plain_hit)
{
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    Run plain_run = {-1, 0.0, 0, 0};
    for (Py_ssize_t t = 0; t < n; t++) {
        const double *v = values + t * k;
        const int64_t first = first_hit[t];
        const Py_ssize_t cluster = row_cluster != NULL ? (Py_ssize_t)row_cluster[t] : 0;
        Py_ssize_t j = 0;
        while (j < k) {
            const Py_ssize_t b = (Py_ssize_t)bin_of(v[j], scale, n_bins);
            const Py_ssize_t index = b * clusters + cluster;
            Py_ssize_t e = j;
            if (plain_sum != NULL) {
                if (b != plain_run.bin) {
                    run_end(&plain_run, plain_count, plain_sum, plain_hit);
                    plain_run.bin = b;
                    plain_run.sum = plain_sum[b];
                    plain_run.count = plain_run.hits = 0;
                }
                double s = sum[index], p = plain_run.sum;
                do {
                    s += v[e];
                    p += v[e];
                    e++;
                } while (e < k && bin_of(v[e], scale, n_bins) == b);
                sum[index] = s;
                plain_run.sum = p;
            } else {
                double s = sum[index];
                do {
                    s += v[e];
                    e++;
                } while (e < k && bin_of(v[e], scale, n_bins) == b);
                sum[index] = s;
            }
            const Py_ssize_t from = first > j ? (Py_ssize_t)first : j;
            const int64_t hits = e > from ? (int64_t)(e - from) : 0;
            count[index] += (double)(e - j);
            hit[index] += (double)hits;
            plain_run.count += e - j; /* stored by run_end, with plain_sum */
            plain_run.hits += hits;
            j = e;
        }
    }
    if (plain_sum != NULL)
        run_end(&plain_run, plain_count, plain_sum, plain_hit);
}

/* Equal-width bin counts (calib.core.binning.BinCounter): value v goes to bin_of(v), in group j (its column)
 * when by_column, else group 0; per group and bin the count, the sum of the values in element order
 * (np.bincount's order into zeroed buffers, np.add.at's into running ones: the same bits either way) and
 * the count of hits, all added into the float64 buffers (counts exact below 2^53): hits[i, j] given, or j >= first_hit[i]
 * (group 0 only: row i's hits from its first, such as the label's rank among cumulative masses), or none.
 * With row_cluster, each bin is kept per cluster of rows (the bootstrap's per-cluster sums, calib.bootstrap):
 * the buffers hold groups x bins x clusters, the cluster innermost, and row i's values go to its cluster
 * row_cluster[i]; each bin adds its values in element order (a bin's values are one cluster's).
 *
 * In group 0, consecutive values in the same bin (a row of cumulative masses, which never decreases, stays in
 * each bin for a run) are added to the bin's sum held in a register and stored when the run ends: the same
 * additions in the same order, without a store and reload of the sum between them (2.7x faster on CMCE's
 * pairs). With plain_count, plain_sum and plain_hit beside row_cluster, the counts over every row are filled
 * in the same pass, in a run of their own beside the cluster's: the two runs' additions overlap in the
 * processor, where two passes would each wait on one chain of additions.
 *
 * By column with first_missing and first_sum (clusters x k, the cluster outermost), the first bin's values are
 * summed there instead of in sums: most values of many classes are in the first bin, and one pass along a row
 * adds each (its bin's sum + 0.0 for the others: the same bits) into one cluster's contiguous k numbers, where
 * the buffers' layout would write each to another cache line; the other bins' values, a few a row, are then
 * added where they belong and counted in first_missing, so the first bin's count is the cluster's rows less
 * those (calib.core.binning.BinCounter folds the first bin into the buffers when read). With plain_count,
 * plain_sum and plain_hit (k x n_bins, zeroed) and plain_first (2 k zeroed numbers of scratch), the counts
 * over every row are filled in the same pass: the first bin's sums and missing values in plain_first (row by
 * row, as a cluster's), added to the plain buffers at the end (0 + s = s: the bits of adding each value in
 * turn; the count n less the values elsewhere, exact).
 * Compiled without fused multiply-adds. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("fp-contract=off")))
#endif
static void bin_counts_rows(const double *values, const uint8_t *hits, const int64_t *first_hit,
                            const int64_t *row_cluster, Py_ssize_t n, Py_ssize_t k,
                            int n_bins, double scale, int by_column, Py_ssize_t clusters, double *count,
                            double *sum, double *hit, double *first_missing, double *first_sum, double *plain_count,
                            double *plain_sum, double *plain_hit, double *plain_first, const int64_t *hit_column)
{
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    if (by_column && first_missing != NULL) { /* the first bin apart, one cluster's k sums a row */
        for (Py_ssize_t t = 0; t < n; t++) {
            const double *v = values + t * k;
            const uint8_t *h = hits != NULL ? hits + t * k : NULL;
            const Py_ssize_t cluster = row_cluster != NULL ? (Py_ssize_t)row_cluster[t] : 0;
            const int elsewhere = first_bin_row(v, first_sum + cluster * k, plain_first, k, scale, n_bins);
            if (hit_column != NULL) { /* the row's one hit: its column's value */
                const Py_ssize_t j = (Py_ssize_t)hit_column[t];
                const Py_ssize_t plain_index = j * (Py_ssize_t)n_bins + bin_of(v[j], scale, n_bins);
                hit[plain_index * clusters + cluster] += 1.0;
                if (plain_first != NULL)
                    plain_hit[plain_index] += 1.0;
            }
            if (!elsewhere && h == NULL)
                continue;
            for (Py_ssize_t j = 0; j < k; j++) { /* the other bins' values, and every hit */
                const int32_t b = bin_of(v[j], scale, n_bins);
                const Py_ssize_t plain_index = j * (Py_ssize_t)n_bins + b;
                const Py_ssize_t index = plain_index * clusters + cluster;
                if (b != 0) {
                    count[index] += 1.0;
                    sum[index] += v[j];
                    first_missing[cluster * k + j] += 1.0;
                    if (plain_first != NULL) {
                        plain_count[plain_index] += 1.0;
                        plain_sum[plain_index] += v[j];
                        plain_first[k + j] += 1.0;
                    }
                }
                if (h != NULL && h[j]) {
                    hit[index] += 1.0;
                    if (plain_first != NULL)
                        plain_hit[plain_index] += 1.0;
                }
            }
        }
        if (plain_first != NULL)
            add_first_bin(plain_count, plain_sum, plain_first, k, n_bins, n);
        return;
    }
    if (by_column) { /* every value in another group from the last: no runs */
        for (Py_ssize_t t = 0; t < n; t++) {
            const double *v = values + t * k;
            const uint8_t *h = hits != NULL ? hits + t * k : NULL;
            const Py_ssize_t cluster = row_cluster != NULL ? (Py_ssize_t)row_cluster[t] : 0;
            for (Py_ssize_t j = 0; j < k; j++) {
                Py_ssize_t index = (j * (Py_ssize_t)n_bins + bin_of(v[j], scale, n_bins)) * clusters + cluster;
                count[index] += 1.0;
                sum[index] += v[j];
                if (h != NULL)
                    hit[index] += h[j] != 0;
            }
            if (hit_column != NULL) {
                const Py_ssize_t j = (Py_ssize_t)hit_column[t];
                hit[(j * (Py_ssize_t)n_bins + bin_of(v[j], scale, n_bins)) * clusters + cluster] += 1.0;
            }
        }
        return;
    }
    if (first_hit != NULL) { /* without hits: bin_counts refuses the two together */
        first_hit_runs(values, first_hit, row_cluster, n, k, n_bins, scale, clusters, count, sum, hit, plain_count,
                       plain_sum, plain_hit);
        return;
    }
    if (plain_count != NULL) /* two copies of the loop, with and without the plain run */
        group_runs(values, hits, row_cluster, n, k, n_bins, scale, clusters, count, sum, hit, plain_count, plain_sum,
                   plain_hit, 1);
    else
        group_runs(values, hits, row_cluster, n, k, n_bins, scale, clusters, count, sum, hit, NULL, NULL, NULL, 0);
}

/* Cumulative top-k mass (calib.metrics.Batch.cumulative_mass), in place: each row of m holds -p sorted
 * non-decreasing (so p non-increasing) and becomes m_k = min(max(p_1 + ... + p_k, 0), 1), added left to
 * right. These are NumPy's additions of the cumulative sum of the negated row, negated: rounding to
 * nearest is symmetric, so (-a) + (-b) = -(a + b) exactly and the bits are the same. */
MULTIVERSION
static void cumulative_mass_rows(double *m, Py_ssize_t n, Py_ssize_t k)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        double *row = m + i * k;
        double total = 0.0;
        for (Py_ssize_t j = 0; j < k; j++) {
            total = j == 0 ? -row[0] : total + -row[j];
            row[j] = total < 0.0 ? 0.0 : (total > 1.0 ? 1.0 : total);
        }
    }
}

/* How many of x[0..count) compare true against t: above (x > t), at least (x >= t), below (x < t) or
 * at most (x <= t); NaN compares false, as in NumPy. */
enum { ABOVE = 0, AT_LEAST = 1, BELOW = 2, AT_MOST = 3 };

#define COUNT_LOOP(OP)                                                                                                 \
    for (; j + W <= count; j += W) {                                                                                   \
        vec v = load(x + j);                                                                                           \
        total -= (lanes)(v OP threshold);                                                                              \
    }                                                                                                                  \
    for (; j < count; j++)                                                                                             \
        rest += x[j] OP t;

static inline int64_t count_compared(const double *x, Py_ssize_t count, double t, int op)
{
    lanes total = {0, 0, 0, 0};
    vec threshold = splat(t);
    int64_t rest = 0;
    Py_ssize_t j = 0;
    switch (op) {
    case ABOVE:
        COUNT_LOOP(>)
        break;
    case AT_LEAST:
        COUNT_LOOP(>=)
        break;
    case BELOW:
        COUNT_LOOP(<)
        break;
    default:
        COUNT_LOOP(<=)
    }
    return (total[0] + total[1]) + (total[2] + total[3]) + rest;
}

/* The 0-based rank of each row's label y in the non-increasing order of p, ties to the lower class
 * index (calib.core.numerics.label_rank): #{j < y : p_j >= p_y} + #{j > y : p_j > p_y}. Returns 0 when a
 * label is outside [0, k). */
MULTIVERSION
static int label_rank_rows(const double *probs, const int64_t *labels, Py_ssize_t n, Py_ssize_t k, int64_t *rank)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        const double *p = probs + i * k;
        int64_t y = labels[i];
        if (y < 0 || y >= k)
            return 0;
        double own = p[y];
        rank[i] = count_compared(p, y, own, AT_LEAST) + count_compared(p + y + 1, k - y - 1, own, ABOVE);
    }
    return 1;
}

/* Per row of values, how many entries lie below lo (strictly) and how many at most hi. */
MULTIVERSION
static void range_counts_rows(const double *values, Py_ssize_t n, Py_ssize_t k, double lo, double hi, int64_t *below,
                              int64_t *at_most)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        below[i] = count_compared(values + i * k, k, lo, BELOW);
        at_most[i] = count_compared(values + i * k, k, hi, AT_MOST);
    }
}

static int check_size(const Py_buffer *buffer, Py_ssize_t expected, const char *name)
{
    if (buffer->len != expected) {
        PyErr_Format(PyExc_ValueError, "%s has %zd bytes; expected %zd", name, buffer->len, expected);
        return 0;
    }
    return 1;
}

/* Scratch for ``rows`` padded rows of k doubles (one more value, so that k = 0 still allocates);
 * NULL with MemoryError set when it fails. */
static double *scratch_rows(int rows, Py_ssize_t k)
{
    double *scratch = malloc((size_t)(rows * padded_length(k) + 1) * sizeof(double));
    if (scratch == NULL)
        PyErr_NoMemory();
    return scratch;
}

PyDoc_STRVAR(softmax_doc,
"softmax(z, n, k, probs, log_probs)\n\n"
"Row softmax of the C-contiguous float64 (n, k) buffer z into probs and/or log_probs (float64 (n, k)\n"
"buffers, or None).");

static PyObject *softmax(PyObject *self, PyObject *args)
{
    Py_buffer z, probs = {0}, log_probs = {0};
    Py_ssize_t n, k;
    PyObject *probs_object, *log_probs_object;
    if (!PyArg_ParseTuple(args, "y*nnOO", &z, &n, &k, &probs_object, &log_probs_object))
        return NULL;
    PyObject *result = NULL;
    double *scratch = NULL;
    if (probs_object != Py_None && PyObject_GetBuffer(probs_object, &probs, PyBUF_WRITABLE) < 0)
        goto done;
    if (log_probs_object != Py_None && PyObject_GetBuffer(log_probs_object, &log_probs, PyBUF_WRITABLE) < 0)
        goto done;
    Py_ssize_t bytes = n * k * (Py_ssize_t)sizeof(double);
    if (n < 0 || k < 0 || !check_size(&z, bytes, "z") || (probs.obj != NULL && !check_size(&probs, bytes, "probs"))
        || (log_probs.obj != NULL && !check_size(&log_probs, bytes, "log_probs")))
        goto done;
    if ((scratch = scratch_rows(2, k)) == NULL) /* c, w */
        goto done;
    Py_BEGIN_ALLOW_THREADS
    softmax_rows(z.buf, n, k, probs.obj != NULL ? probs.buf : NULL, log_probs.obj != NULL ? log_probs.buf : NULL, scratch);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    free(scratch);
    PyBuffer_Release(&z);
    if (probs.obj != NULL)
        PyBuffer_Release(&probs);
    if (log_probs.obj != NULL)
        PyBuffer_Release(&log_probs);
    return result;
}

PyDoc_STRVAR(moments_doc,
"moments(z, n, k, beta, mean, variance)\n\n"
"Per row of the C-contiguous float64 (n, k) buffer z, the mean and variance of z under\n"
"softmax(beta * z) (beta > 0), into the float64 (n,) buffers mean and variance.");

static PyObject *moments(PyObject *self, PyObject *args)
{
    Py_buffer z, mean, variance;
    Py_ssize_t n, k;
    double beta;
    if (!PyArg_ParseTuple(args, "y*nndw*w*", &z, &n, &k, &beta, &mean, &variance))
        return NULL;
    PyObject *result = NULL;
    double *scratch = NULL;
    if (n < 0 || k < 0 || !check_size(&z, n * k * (Py_ssize_t)sizeof(double), "z")
        || !check_size(&mean, n * (Py_ssize_t)sizeof(double), "mean")
        || !check_size(&variance, n * (Py_ssize_t)sizeof(double), "variance"))
        goto done;
    if (!(beta > 0.0)) {
        PyErr_SetString(PyExc_ValueError, "beta must be positive");
        goto done;
    }
    if ((scratch = scratch_rows(1, k)) == NULL) /* c */
        goto done;
    Py_BEGIN_ALLOW_THREADS
    moments_rows(z.buf, n, k, beta, mean.buf, variance.buf, scratch);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    free(scratch);
    PyBuffer_Release(&z);
    PyBuffer_Release(&mean);
    PyBuffer_Release(&variance);
    return result;
}

PyDoc_STRVAR(select_tau_doc,
"select_tau(scores, in_set, target, beta, category, dist, log_space, beta_min, beta_max, mass_tol, rel_width, max_iterations)\n\n"
"Rows of C-contiguous buffers: scores float64 (n, k), in_set bool (n, k), target float64 (n,); writes\n"
"beta float64 (n,), category int8 (n,) and, unless dist is None, softmax(beta * scores) per row\n"
"(its log when log_space) into dist float64 (n, k).");

static PyObject *select_tau(PyObject *self, PyObject *args)
{
    Py_buffer scores, in_set, target, beta, category, dist = {0};
    PyObject *dist_object;
    int log_space;
    Settings s;
    if (!PyArg_ParseTuple(args, "y*y*y*w*w*Opddddl", &scores, &in_set, &target, &beta, &category, &dist_object,
                          &log_space, &s.beta_min, &s.beta_max, &s.mass_tol, &s.rel_width, &s.max_iterations))
        return NULL;
    PyObject *result = NULL;
    double *scratch = NULL;
    int have_dist = dist_object != Py_None;
    if (have_dist && PyObject_GetBuffer(dist_object, &dist, PyBUF_WRITABLE) < 0)
        goto done;
    Py_ssize_t n = target.len / (Py_ssize_t)sizeof(double);
    Py_ssize_t k = n > 0 ? scores.len / (Py_ssize_t)sizeof(double) / n : 0;
    if (!check_size(&target, n * (Py_ssize_t)sizeof(double), "target") || !check_size(&scores, n * k * (Py_ssize_t)sizeof(double), "scores")
        || !check_size(&in_set, n * k, "in_set") || !check_size(&beta, n * (Py_ssize_t)sizeof(double), "beta")
        || !check_size(&category, n, "category")
        || (have_dist && !check_size(&dist, n * k * (Py_ssize_t)sizeof(double), "dist")))
        goto done;
    if ((scratch = scratch_rows(3, k)) == NULL) /* c, m, w */
        goto done;
    Py_BEGIN_ALLOW_THREADS
    solve_rows(scores.buf, in_set.buf, target.buf, n, k, &s, beta.buf, category.buf, have_dist ? dist.buf : NULL,
               log_space, scratch);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    free(scratch);
    PyBuffer_Release(&scores);
    PyBuffer_Release(&in_set);
    PyBuffer_Release(&target);
    PyBuffer_Release(&beta);
    PyBuffer_Release(&category);
    if (have_dist && dist.obj != NULL)
        PyBuffer_Release(&dist);
    return result;
}

PyDoc_STRVAR(log_doc,
"log(values, shift, floor, out)\n\n"
"out = log(max(values + shift, floor)) elementwise, for C-contiguous float64 buffers of one size.");

static PyObject *log_kernel(PyObject *self, PyObject *args)
{
    Py_buffer values, out;
    double shift, floor;
    if (!PyArg_ParseTuple(args, "y*ddw*", &values, &shift, &floor, &out))
        return NULL;
    PyObject *result = NULL;
    if (!check_size(&out, values.len, "out") || values.len % (Py_ssize_t)sizeof(double) != 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "values must hold float64");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    log_values(values.buf, values.len / (Py_ssize_t)sizeof(double), shift, floor, out.buf);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&values);
    PyBuffer_Release(&out);
    return result;
}

PyDoc_STRVAR(rank_scores_doc,
"rank_scores(probs, ranking, column_mask, n, k, base, table, out, misranked)\n\n"
"Conformal scores of every class from a ranking: C-contiguous probs float64 (n, k) and ranking uint64\n"
"(n, k) (columns under column_mask), base 0 (cumulative sum), 1 (top probability) or 2 (none), table\n"
"float64 (k,) or None; writes out float64 (n, k) in class order and misranked uint8 (n,).");

static PyObject *rank_scores(PyObject *self, PyObject *args)
{
    Py_buffer probs, ranking, out, misranked, table = {0};
    Py_ssize_t n, k;
    unsigned long long column_mask;
    int base, ok = 1;
    PyObject *table_object;
    if (!PyArg_ParseTuple(args, "y*y*KnniOw*w*", &probs, &ranking, &column_mask, &n, &k, &base, &table_object, &out,
                          &misranked))
        return NULL;
    PyObject *result = NULL;
    if (table_object != Py_None && PyObject_GetBuffer(table_object, &table, PyBUF_SIMPLE) < 0)
        goto done;
    Py_ssize_t bytes = n * k * (Py_ssize_t)sizeof(double);
    if (n < 0 || k < 0 || !check_size(&probs, bytes, "probs")
        || !check_size(&ranking, n * k * (Py_ssize_t)sizeof(uint64_t), "ranking") || !check_size(&out, bytes, "out")
        || !check_size(&misranked, n, "misranked")
        || (table.obj != NULL && !check_size(&table, k * (Py_ssize_t)sizeof(double), "table")))
        goto done;
    if (base < CUMULATIVE || base > NO_BASE || (base == NO_BASE && table.obj == NULL)) {
        PyErr_SetString(PyExc_ValueError, "base must be 0, 1 or 2, and 2 needs a table");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    ok = rank_scores_rows(probs.buf, ranking.buf, (uint64_t)column_mask, n, k, base,
                          table.obj != NULL ? table.buf : NULL, out.buf, misranked.buf);
    Py_END_ALLOW_THREADS
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "ranking holds a column outside [0, k)");
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&probs);
    PyBuffer_Release(&ranking);
    PyBuffer_Release(&out);
    PyBuffer_Release(&misranked);
    if (table.obj != NULL)
        PyBuffer_Release(&table);
    return result;
}

PyDoc_STRVAR(set_update_doc,
"set_update(values, in_set, inside, outside, add)\n\n"
"In place on the C-contiguous float64 (n, k) buffer values: + (add) or * the float64 (n,) inside where\n"
"the bool (n, k) in_set holds, else outside.");

static PyObject *set_update(PyObject *self, PyObject *args)
{
    Py_buffer values, in_set, inside, outside;
    int add;
    if (!PyArg_ParseTuple(args, "w*y*y*y*p", &values, &in_set, &inside, &outside, &add))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = inside.len / (Py_ssize_t)sizeof(double);
    Py_ssize_t k = n > 0 ? values.len / (Py_ssize_t)sizeof(double) / n : 0;
    if (!check_size(&inside, n * (Py_ssize_t)sizeof(double), "inside") || !check_size(&outside, inside.len, "outside")
        || !check_size(&values, n * k * (Py_ssize_t)sizeof(double), "values") || !check_size(&in_set, n * k, "in_set"))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    set_update_rows(values.buf, in_set.buf, inside.buf, outside.buf, n, k, add);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&values);
    PyBuffer_Release(&in_set);
    PyBuffer_Release(&inside);
    PyBuffer_Release(&outside);
    return result;
}

/* Whether the first bin of every group holds no count and a zero sum (buffers of k groups of n_bins): then its
 * values summed apart from zero and added at the end give the bits of adding each in turn. */
static int first_bin_empty(const double *count, const double *sum, Py_ssize_t k, int n_bins)
{
    for (Py_ssize_t j = 0; j < k; j++)
        if (count[j * (Py_ssize_t)n_bins] != 0.0 || sum[j * (Py_ssize_t)n_bins] != 0.0)
            return 0;
    return 1;
}

PyDoc_STRVAR(bin_counts_doc,
"bin_counts(values, hits, first_hit, row_cluster, n, k, n_bins, scale, by_column, clusters, count, sums,\n"
"hit_count, first_missing=None, first_sum=None, plain_count=None, plain_sums=None, plain_hits=None,\n"
"hit_column=None)\n\n"
"Equal-width bin counts of the C-contiguous float64 (n, k) buffer values added into the float64 count,\n"
"sums and hit_count buffers (k groups of n_bins when by_column, else one): the values'\n"
"count, sum and the count of hits per bin, the hits from the uint8 (n, k) hits, or (not by_column)\n"
"each row's columns from its int64 first_hit on, or none (both None). With the int64 row_cluster, each bin\n"
"is kept per cluster (innermost), row i's in cluster row_cluster[i] (None: one cluster). By column with\n"
"clusters, the float64 first_missing and first_sum (clusters x k) take the first bin's sums instead of sums\n"
"and count the values outside it (the first bin's count is the cluster's rows less those): count holds no\n"
"first-bin count then.\n"
"In group 0 with clusters, or by column\n"
"with the first bin apart, the float64 plain_count, plain_sums and plain_hits (n_bins each, k n_bins by\n"
"column, zeroed by column) get the counts over every row in the same pass. By column without hits, the\n"
"int64 hit_column gives each row's one hit: its value in that column (a label's class).");

static PyObject *bin_counts(PyObject *self, PyObject *args)
{
    Py_buffer values, hits = {0}, first_hit = {0}, row_cluster = {0}, count, sums, hit_count;
    Py_buffer first_missing = {0}, first_sum = {0}, plain[3] = {{0}, {0}, {0}};
    double *plain_first = NULL; /* by column beside clusters: the plain first bin's sums and missing counts, k each */
    double *apart = NULL;       /* by column over every row: the first bin's sums and missing counts, k each */
    PyObject *hits_object, *first_hit_object, *row_cluster_object;
    PyObject *first_missing_object = Py_None, *first_sum_object = Py_None, *plain_objects[3] = {Py_None, Py_None, Py_None};
    PyObject *hit_column_object = Py_None;
    Py_buffer hit_column = {0};
    Py_ssize_t n, k, clusters;
    int n_bins, by_column;
    double scale;
    if (!PyArg_ParseTuple(args, "y*OOOnnidpnw*w*w*|OOOOOO", &values, &hits_object, &first_hit_object,
                          &row_cluster_object, &n, &k, &n_bins, &scale, &by_column, &clusters, &count,
                          &sums, &hit_count, &first_missing_object, &first_sum_object, &plain_objects[0],
                          &plain_objects[1], &plain_objects[2], &hit_column_object))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t groups = (by_column ? k : 1) * clusters;
    if (hits_object != Py_None && PyObject_GetBuffer(hits_object, &hits, PyBUF_SIMPLE) < 0)
        goto done;
    if (first_hit_object != Py_None && PyObject_GetBuffer(first_hit_object, &first_hit, PyBUF_SIMPLE) < 0)
        goto done;
    if (row_cluster_object != Py_None && PyObject_GetBuffer(row_cluster_object, &row_cluster, PyBUF_SIMPLE) < 0)
        goto done;
    if ((first_missing_object == Py_None) != (first_sum_object == Py_None)) {
        PyErr_SetString(PyExc_ValueError, "first_missing and first_sum go together");
        goto done;
    }
    if (first_missing_object != Py_None
        && (PyObject_GetBuffer(first_missing_object, &first_missing, PyBUF_WRITABLE) < 0
            || PyObject_GetBuffer(first_sum_object, &first_sum, PyBUF_WRITABLE) < 0))
        goto done;
    if (first_missing.obj != NULL && (!by_column || row_cluster.obj == NULL)) {
        PyErr_SetString(PyExc_ValueError, "the first bin apart goes by column, with row_cluster");
        goto done;
    }
    for (int p = 0; p < 3; p++)
        if (plain_objects[p] != Py_None && PyObject_GetBuffer(plain_objects[p], &plain[p], PyBUF_WRITABLE) < 0)
            goto done;
    if ((plain[0].obj != NULL || plain[1].obj != NULL || plain[2].obj != NULL)
        && (plain[0].obj == NULL || plain[1].obj == NULL || plain[2].obj == NULL || row_cluster.obj == NULL
            || (by_column && first_missing.obj == NULL))) {
        PyErr_SetString(PyExc_ValueError,
                        "the plain counts go in three buffers beside row_cluster, in group 0 or by column with the first bin apart");
        goto done;
    }
    for (int p = 0; p < 3; p++)
        if (plain[p].obj != NULL
            && !check_size(&plain[p], (by_column ? k : 1) * n_bins * (Py_ssize_t)sizeof(double), "a plain count"))
            goto done;
    if (by_column && plain[0].obj != NULL && (plain_first = calloc(2 * (size_t)(k > 0 ? k : 1), sizeof(double))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (clusters < 1 || (row_cluster.obj == NULL && clusters != 1)) {
        PyErr_SetString(PyExc_ValueError, "clusters must be at least 1, and 1 without row_cluster");
        goto done;
    }
    if (n_bins < 1) {
        PyErr_SetString(PyExc_ValueError, "n_bins must be at least 1");
        goto done;
    }
    if (first_hit.obj != NULL && (hits.obj != NULL || by_column)) {
        PyErr_SetString(PyExc_ValueError, "first_hit goes without hits, in group 0");
        goto done;
    }
    if (!check_size(&values, n * k * (Py_ssize_t)sizeof(double), "values")
        || (hits.obj != NULL && !check_size(&hits, n * k, "hits"))
        || (first_hit.obj != NULL && !check_size(&first_hit, n * (Py_ssize_t)sizeof(int64_t), "first_hit"))
        || (row_cluster.obj != NULL && !check_size(&row_cluster, n * (Py_ssize_t)sizeof(int64_t), "row_cluster"))
        || !check_size(&count, groups * n_bins * (Py_ssize_t)sizeof(double), "count")
        || !check_size(&sums, groups * n_bins * (Py_ssize_t)sizeof(double), "sums")
        || !check_size(&hit_count, groups * n_bins * (Py_ssize_t)sizeof(double), "hit_count")
        || (first_missing.obj != NULL && !check_size(&first_missing, groups * (Py_ssize_t)sizeof(double), "first_missing"))
        || (first_sum.obj != NULL && !check_size(&first_sum, groups * (Py_ssize_t)sizeof(double), "first_sum")))
        goto done;
    if (hit_column_object != Py_None) { /* by column, without a hits matrix: each row's hit column inside the row */
        if (PyObject_GetBuffer(hit_column_object, &hit_column, PyBUF_SIMPLE) < 0)
            goto done;
        if (!by_column || hits.obj != NULL) {
            PyErr_SetString(PyExc_ValueError, "hit_column goes by column, without hits");
            goto done;
        }
        if (!check_size(&hit_column, n * (Py_ssize_t)sizeof(int64_t), "hit_column"))
            goto done;
        const int64_t *column = hit_column.buf;
        for (Py_ssize_t i = 0; i < n; i++)
            if (column[i] < 0 || column[i] >= k) {
                PyErr_SetString(PyExc_ValueError, "hit_column out of the columns");
                goto done;
            }
    }
    if (row_cluster.obj != NULL) { /* every row's cluster inside the buffers */
        const int64_t *cluster = row_cluster.buf;
        for (Py_ssize_t i = 0; i < n; i++)
            if (cluster[i] < 0 || cluster[i] >= clusters) {
                PyErr_SetString(PyExc_ValueError, "row_cluster out of the clusters");
                goto done;
            }
    }
    /* By column over every row into empty first bins: the first bin apart as a cluster's (one pass along a row's
     * k sums instead of a cache line a value), its missing counts and sums here, added to the buffers after. */
    if (by_column && row_cluster.obj == NULL && first_missing.obj == NULL && first_bin_empty(count.buf, sums.buf, k, n_bins)
        && (apart = calloc(2 * (size_t)(k > 0 ? k : 1), sizeof(double))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    bin_counts_rows(values.buf, hits.obj != NULL ? hits.buf : NULL, first_hit.obj != NULL ? first_hit.buf : NULL,
                    row_cluster.obj != NULL ? row_cluster.buf : NULL, n, k,
                    n_bins, scale, by_column, clusters, count.buf, sums.buf, hit_count.buf,
                    apart != NULL ? apart + k : (first_missing.obj != NULL ? first_missing.buf : NULL),
                    apart != NULL ? apart : (first_sum.obj != NULL ? first_sum.buf : NULL),
                    plain[0].buf, plain[1].buf, plain[2].buf, plain_first,
                    hit_column.obj != NULL ? hit_column.buf : NULL);
    if (apart != NULL)
        add_first_bin(count.buf, sums.buf, apart, k, n_bins, n);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&values);
    PyBuffer_Release(&count);
    PyBuffer_Release(&sums);
    PyBuffer_Release(&hit_count);
    if (hits.obj != NULL)
        PyBuffer_Release(&hits);
    if (first_hit.obj != NULL)
        PyBuffer_Release(&first_hit);
    if (row_cluster.obj != NULL)
        PyBuffer_Release(&row_cluster);
    if (first_missing.obj != NULL)
        PyBuffer_Release(&first_missing);
    if (first_sum.obj != NULL)
        PyBuffer_Release(&first_sum);
    for (int p = 0; p < 3; p++)
        if (plain[p].obj != NULL)
            PyBuffer_Release(&plain[p]);
    if (hit_column.obj != NULL)
        PyBuffer_Release(&hit_column);
    free(plain_first);
    free(apart);
    return result;
}

PyDoc_STRVAR(cumulative_mass_doc,
"cumulative_mass(mass, n, k)\n\n"
"In place on the C-contiguous float64 (n, k) buffer mass, each row -p sorted non-decreasing: the\n"
"cumulative sums of p, clipped to [0, 1].");

static PyObject *cumulative_mass(PyObject *self, PyObject *args)
{
    Py_buffer mass;
    Py_ssize_t n, k;
    if (!PyArg_ParseTuple(args, "w*nn", &mass, &n, &k))
        return NULL;
    PyObject *result = NULL;
    if (n < 0 || k < 0 || !check_size(&mass, n * k * (Py_ssize_t)sizeof(double), "mass"))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    cumulative_mass_rows(mass.buf, n, k);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&mass);
    return result;
}

PyDoc_STRVAR(label_rank_doc,
"label_rank(probs, labels, n, k, rank)\n\n"
"The 0-based rank of each row's label in the non-increasing order of the C-contiguous float64 (n, k)\n"
"probs, ties to the lower class index, from the int64 (n,) labels into the int64 (n,) rank.");

static PyObject *label_rank(PyObject *self, PyObject *args)
{
    Py_buffer probs, labels, rank;
    Py_ssize_t n, k;
    int ok = 1;
    if (!PyArg_ParseTuple(args, "y*y*nnw*", &probs, &labels, &n, &k, &rank))
        return NULL;
    PyObject *result = NULL;
    if (n < 0 || k < 0 || !check_size(&probs, n * k * (Py_ssize_t)sizeof(double), "probs")
        || !check_size(&labels, n * (Py_ssize_t)sizeof(int64_t), "labels")
        || !check_size(&rank, n * (Py_ssize_t)sizeof(int64_t), "rank"))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    ok = label_rank_rows(probs.buf, labels.buf, n, k, rank.buf);
    Py_END_ALLOW_THREADS
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "labels hold a class outside [0, k)");
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&probs);
    PyBuffer_Release(&labels);
    PyBuffer_Release(&rank);
    return result;
}

PyDoc_STRVAR(range_counts_doc,
"range_counts(values, n, k, lo, hi, below, at_most)\n\n"
"Per row of the C-contiguous float64 (n, k) values, how many entries are below lo and how many at\n"
"most hi, into the int64 (n,) below and at_most.");

static PyObject *range_counts(PyObject *self, PyObject *args)
{
    Py_buffer values, below, at_most;
    Py_ssize_t n, k;
    double lo, hi;
    if (!PyArg_ParseTuple(args, "y*nnddw*w*", &values, &n, &k, &lo, &hi, &below, &at_most))
        return NULL;
    PyObject *result = NULL;
    if (n < 0 || k < 0 || !check_size(&values, n * k * (Py_ssize_t)sizeof(double), "values")
        || !check_size(&below, n * (Py_ssize_t)sizeof(int64_t), "below")
        || !check_size(&at_most, n * (Py_ssize_t)sizeof(int64_t), "at_most"))
        goto done;
    Py_BEGIN_ALLOW_THREADS
    range_counts_rows(values.buf, n, k, lo, hi, below.buf, at_most.buf);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&values);
    PyBuffer_Release(&below);
    PyBuffer_Release(&at_most);
    return result;
}

static PyMethodDef methods[] = {
    {"log", log_kernel, METH_VARARGS, log_doc},
    {"softmax", softmax, METH_VARARGS, softmax_doc},
    {"moments", moments, METH_VARARGS, moments_doc},
    {"select_tau", select_tau, METH_VARARGS, select_tau_doc},
    {"rank_scores", rank_scores, METH_VARARGS, rank_scores_doc},
    {"set_update", set_update, METH_VARARGS, set_update_doc},
    {"bin_counts", bin_counts, METH_VARARGS, bin_counts_doc},
    {"cumulative_mass", cumulative_mass, METH_VARARGS, cumulative_mass_doc},
    {"label_rank", label_rank, METH_VARARGS, label_rank_doc},
    {"range_counts", range_counts, METH_VARARGS, range_counts_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_kernels", "calib's compiled inner loops: log, row softmax, tempered moments, SelectTau, conformal scores by rank, MR's update, bin counts, cumulative mass, label ranks and range counts (see _kernels.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
