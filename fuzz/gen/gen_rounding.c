/* How far float rounding alone can move a generated graph's results, so that a
 * device computing in float can be judged against the double-accumulating CPU
 * reference without false failures on ill-conditioned graphs.
 *
 * On a well-conditioned graph a float device and the reference agree to about
 * 1e-12 NMSE, far inside the model-level bound.  On an ill-conditioned one (the
 * sum of a normalised row, the square of a cancelled difference) float rounding
 * alone moves a result by O(1), and a difference says nothing about the device.
 * To tell the two apart the reference is computed again with noise in the
 * manner of Monte Carlo arithmetic (Parker, 1997): after every node, each f32
 * element gets a random error of the size a float implementation's roundings
 * give (add_rounding_noise says which).  How far that moves a result (its
 * NMSE against the clean reference) measures the result's conditioning; a device
 * result must stay within tg_gen_result_bound of it. */
#include "tg-gen.h"

#include "tg-cpu.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform_symmetric(uint64_t *rng) { /* [-1, 1) */
    return (double)(splitmix64(rng) >> 11) * 0x1p-52 - 1.0;
}

/* Float implementations err in two ways, and the noise models both: each
 * element's own roundings (a relative error per element), and an error in an
 * intermediate a whole row shares (a mean, a variance, a maximum, a sum),
 * which shifts every element of the row the same way and so survives a later
 * sum over the row instead of averaging out: an error of TG_GEN_ROUNDING_REL
 * times the row's root mean square, common to the row.  Only f32 nodes that
 * own their memory get noise: views and copies into views write memory
 * another tensor owns. */
static void add_rounding_noise(struct tg_tensor *t, uint64_t *rng) {
    if (t->type != TG_TYPE_F32 || t->view_src || tg_op_is_view(t->op)) return;
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
                double sum_sq = 0;
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    double v = tg_get_f32_nd(t, i0, i1, i2, i3);
                    if (isfinite(v)) sum_sq += v * v;
                }
                const double row_shift = uniform_symmetric(rng) * TG_GEN_ROUNDING_REL * sqrt(sum_sq / (double)t->ne[0]);
                for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                    double v = tg_get_f32_nd(t, i0, i1, i2, i3);
                    v = v * (1.0 + uniform_symmetric(rng) * TG_GEN_ROUNDING_REL) + row_shift;
                    tg_set_f32_nd(t, i0, i1, i2, i3, (float)v);
                }
            }
}

enum tg_status tg_gen_compute_with_rounding_noise(struct tg_graph *g, uint64_t seed) {
    uint64_t rng = seed;
    for (int i = 0; i < g->n_nodes; i++) {
        enum tg_status st = tg_cpu_compute_node(g->nodes[i], 0, 1);
        if (st != TG_OK) return st;
        add_rounding_noise(g->nodes[i], &rng);
    }
    return TG_OK;
}

double tg_gen_result_bound(double noise_nmse) {
    double scaled = TG_GEN_ROUNDING_MARGIN * noise_nmse;
    return isfinite(scaled) && scaled > TG_GEN_MODEL_NMSE ? scaled : TG_GEN_MODEL_NMSE;
}

double tg_gen_nmse(const struct tg_tensor *got, const struct tg_tensor *want, bool *nonfinite_mismatch) {
    double num = 0, den = 0;
    for (int64_t i3 = 0; i3 < want->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < want->ne[2]; i2++)
            for (int64_t i1 = 0; i1 < want->ne[1]; i1++)
                for (int64_t i0 = 0; i0 < want->ne[0]; i0++) {
                    double a = tg_get_f32_nd(got, i0, i1, i2, i3), b = tg_get_f32_nd(want, i0, i1, i2, i3);
                    if (!isfinite(a) || !isfinite(b)) {
                        *nonfinite_mismatch |= !((isnan(a) && isnan(b)) || a == b);
                        continue;
                    }
                    num += (a - b) * (a - b);
                    den += b * b;
                }
    return den > 0 ? num / den : num;
}
