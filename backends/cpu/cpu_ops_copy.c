/* Copies between any two types and layouts: cpy, dup, cont (logical,
 * row-major element order between shapes with equal element counts),
 * get_rows (gathered rows, to f32 or the table's own type) and set_rows
 * (scattered rows, from f32 into any type: the KV-cache writes).
 *
 * Same-type copies move bytes, a block at a time for quantized types, so
 * they are exact for every type.  Conversions go through an f32 row: a
 * quantized source is decoded a block at a time, a quantized destination is
 * encoded a whole row at a time (its rows hold whole blocks). */
#include "cpu-kernels.h"

/* ---- positions --------------------------------------------------------------------- */

/* The shape of t counted in units of one element, or one block for
 * quantized types (a unit of t is nb[0] bytes in its row). */
static void unit_shape(const struct tg_tensor *t, int64_t ne[4]) {
    ne[0] = t->ne[0] / tg_blck_size(t->type);
    ne[1] = t->ne[1];
    ne[2] = t->ne[2];
    ne[3] = t->ne[3];
}

static inline void unravel4(int64_t e, const int64_t ne[4], int64_t i[4]) {
    i[0] = e % ne[0];
    e /= ne[0];
    i[1] = e % ne[1];
    e /= ne[1];
    i[2] = e % ne[2];
    i[3] = e / ne[2];
}

/* Advances a row-major position over shape ne by one. */
static inline void next4(int64_t i[4], const int64_t ne[4]) {
    if (++i[0] < ne[0]) return;
    i[0] = 0;
    if (++i[1] < ne[1]) return;
    i[1] = 0;
    if (++i[2] < ne[2]) return;
    i[2] = 0;
    i[3]++;
}

static inline uint8_t *unit_ptr(const struct tg_tensor *t, const int64_t i[4]) {
    return (uint8_t *)t->data + i[0] * (int64_t)t->nb[0] + i[1] * (int64_t)t->nb[1] + i[2] * (int64_t)t->nb[2] +
           i[3] * (int64_t)t->nb[3];
}

/* ---- reading any type as f32, in logical order -------------------------------------- */

struct reader {
    const struct tg_tensor *t;
    int64_t ne[4], i[4]; /* unit shape and position */
    int64_t blk, k;      /* block size; element within the current unit */
    float *block;        /* the current unit decoded (quantized types) */
};

static void reader_start(struct reader *r, const struct tg_tensor *t, int64_t element, float *block) {
    r->t = t;
    r->blk = tg_blck_size(t->type);
    r->block = block;
    unit_shape(t, r->ne);
    /* element -> (unit, k): rows hold whole units */
    const int64_t row = element / t->ne[0], in_row = element % t->ne[0];
    unravel4(row * r->ne[0] + in_row / r->blk, r->ne, r->i);
    r->k = in_row % r->blk;
    if (r->blk > 1) cpu_to_f32(t->type, unit_ptr(t, r->i), r->block, r->blk);
}

static inline float reader_next(struct reader *r) {
    if (r->blk == 1) {
        const float v = cpu_load(unit_ptr(r->t, r->i), r->t->type);
        next4(r->i, r->ne);
        return v;
    }
    const float v = r->block[r->k];
    if (++r->k == r->blk) {
        r->k = 0;
        next4(r->i, r->ne);
        if (r->i[3] < r->ne[3]) cpu_to_f32(r->t->type, unit_ptr(r->t, r->i), r->block, r->blk);
    }
    return v;
}

/* Writes n f32 values into the row at p of a tensor of type with element
 * stride nb0: whole-row conversion when the row is packed. */
static void write_row(void *p, enum tg_type type, size_t nb0, const float *v, int64_t n) {
    if (tg_type_is_quantized(type) || nb0 == tg_type_size(type)) {
        cpu_from_f32(type, v, p, n);
        return;
    }
    for (int64_t k = 0; k < n; k++) cpu_store((uint8_t *)p + k * (int64_t)nb0, type, v[k]);
}

/* ---- cpy, dup, cont ------------------------------------------------------------------- */

static void copy_same_type(struct tg_tensor *dst, const struct tg_tensor *src, const struct cpu_exec *x) {
    int64_t sne[4], dne[4], s[4], d[4];
    unit_shape(src, sne);
    unit_shape(dst, dne);
    const int64_t n = sne[0] * sne[1] * sne[2] * sne[3];
    const size_t size = tg_type_size(src->type);
    int64_t u0, u1;
    cpu_rows(n, x->ith, x->nth, &u0, &u1);
    if (u0 >= u1) return;
    if (tg_is_contiguous(src) && tg_is_contiguous(dst)) {
        memcpy((uint8_t *)dst->data + u0 * (int64_t)size, (const uint8_t *)src->data + u0 * (int64_t)size,
               (size_t)(u1 - u0) * size);
        return;
    }
    unravel4(u0, sne, s);
    unravel4(u0, dne, d);
    for (int64_t u = u0; u < u1; u++) {
        memcpy(unit_ptr(dst, d), unit_ptr(src, s), size);
        next4(s, sne);
        next4(d, dne);
    }
}

static void copy_converting(struct tg_tensor *dst, const struct tg_tensor *src, const struct cpu_exec *x) {
    float *row = x->own, *block = row + dst->ne[0];
    int64_t r0, r1;
    cpu_rows(tg_nrows(dst), x->ith, x->nth, &r0, &r1);
    if (r0 >= r1) return;
    struct reader rd;
    reader_start(&rd, src, r0 * dst->ne[0], block);
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t k = 0; k < dst->ne[0]; k++) row[k] = reader_next(&rd);
        int64_t i1, i2, i3;
        cpu_unravel(r, dst, &i1, &i2, &i3);
        write_row(cpu_elem(dst, 0, i1, i2, i3), dst->type, dst->nb[0], row, dst->ne[0]);
    }
}

/* ---- get_rows, set_rows -------------------------------------------------------------- */

/* dst[:, i1, i2, i3] = a[:, rows[i1, i2, i3], i2, i3]; an index outside the
 * table gives a zero row. */
static void get_rows(struct tg_tensor *dst, const struct cpu_exec *x) {
    const struct tg_tensor *a = dst->src[0], *idx = dst->src[1];
    float *row = x->own;
    const int64_t n = a->ne[0];
    int64_t r0, r1;
    cpu_rows(tg_nrows(dst), x->ith, x->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        cpu_unravel(r, dst, &i1, &i2, &i3);
        const int64_t at = cpu_index(idx, i1, i2, i3);
        uint8_t *out = cpu_elem(dst, 0, i1, i2, i3);
        if (at < 0 || at >= a->ne[1]) {
            for (int64_t k = 0; k < n; k++) row[k] = 0.0f;
            write_row(out, dst->type, dst->nb[0], row, n);
            continue;
        }
        const uint8_t *in = cpu_elem(a, 0, at, i2, i3);
        const bool packed = tg_type_is_quantized(a->type) || a->nb[0] == tg_type_size(a->type);
        if (a->type == dst->type) { /* every bit kept (i32 rows above 2^24, NaN payloads) */
            const size_t size = tg_type_size(a->type);
            for (int64_t k = 0; k < n / tg_blck_size(a->type); k++) memcpy(out + k * (int64_t)dst->nb[0], in + k * (int64_t)a->nb[0], size);
        } else if (packed) {
            cpu_to_f32(a->type, in, row, n);
            write_row(out, dst->type, dst->nb[0], row, n);
        } else {
            for (int64_t k = 0; k < n; k++) row[k] = cpu_load(in + k * (int64_t)a->nb[0], a->type);
            write_row(out, dst->type, dst->nb[0], row, n);
        }
    }
}

/* dst[:, rows[i1, i2 % ., i3 % .], i2, i3] = b[:, i1, i2, i3], in b's row order.
 * Each thread writes the destination rows r with r % nth == ith, so a
 * repeated index ends with its last source row whatever the thread count. */
static void set_rows(struct tg_tensor *dst, const struct cpu_exec *x) {
    const struct tg_tensor *b = dst->src[0], *idx = dst->src[1];
    float *row = x->own;
    const int64_t n = b->ne[0];
    for (int64_t r = 0; r < tg_nrows(b); r++) {
        int64_t i1, i2, i3;
        cpu_unravel(r, b, &i1, &i2, &i3);
        const int64_t at = cpu_index(idx, i1, i2 % idx->ne[1], i3 % idx->ne[2]);
        if (at < 0 || at >= dst->ne[1] || at % x->nth != x->ith) continue; /* outside: nothing written */
        const uint8_t *in = cpu_elem(b, 0, i1, i2, i3);
        if (b->type == TG_TYPE_F32 && b->nb[0] == sizeof(float)) { /* an f16 row may have a 4-byte stride too */
            memcpy(row, in, (size_t)n * sizeof(float));
        } else {
            for (int64_t k = 0; k < n; k++) row[k] = cpu_load(in + k * (int64_t)b->nb[0], b->type);
        }
        write_row(cpu_elem(dst, 0, at, i2, i3), dst->type, dst->nb[0], row, n);
    }
}

/* ---- the family ------------------------------------------------------------------------- */

enum tg_status cpu_op_copy(struct tg_tensor *dst, const struct cpu_exec *x) {
    switch (dst->op) {
    case TG_OP_GET_ROWS: get_rows(dst, x); break;
    case TG_OP_SET_ROWS: set_rows(dst, x); break;
    default:
        if (dst->src[0]->type == dst->type) copy_same_type(dst, dst->src[0], x);
        else copy_converting(dst, dst->src[0], x);
        break;
    }
    return TG_OK;
}

struct cpu_work cpu_work_copy(const struct tg_tensor *dst) {
    const struct tg_tensor *a = dst->src[0];
    if (!a) return (struct cpu_work){0, 0};
    switch (dst->op) {
    case TG_OP_GET_ROWS: case TG_OP_SET_ROWS: return (struct cpu_work){0, (size_t)a->ne[0] * sizeof(float)};
    default:
        if (a->type == dst->type) return (struct cpu_work){0, 0};
        return (struct cpu_work){0, ((size_t)dst->ne[0] + CPU_QK_K) * sizeof(float)};
    }
}

/* Rows of a quantized tensor hold whole blocks, packed. */
static bool blocks_ok(const struct tg_tensor *t) {
    return !tg_type_is_quantized(t->type) || (t->ne[0] % tg_blck_size(t->type) == 0 && t->nb[0] == tg_type_size(t->type));
}

static bool is_index(enum tg_type t) { return t == TG_TYPE_I32 || t == TG_TYPE_I64; }

bool cpu_supports_copy(const struct tg_tensor *dst) {
    const struct tg_tensor *a = dst->src[0], *b = dst->src[1];
    if (!a || (unsigned)a->type >= TG_TYPE_COUNT || (unsigned)dst->type >= TG_TYPE_COUNT) return false;
    if (!blocks_ok(a) || !blocks_ok(dst)) return false;
    switch (dst->op) {
    case TG_OP_CPY: case TG_OP_DUP: case TG_OP_CONT:
        return tg_nelements(a) == tg_nelements(dst);
    case TG_OP_GET_ROWS:
        return b && is_index(b->type) && (dst->type == TG_TYPE_F32 || dst->type == a->type) && dst->ne[0] == a->ne[0] &&
               dst->ne[1] == b->ne[0] && dst->ne[2] == b->ne[1] && dst->ne[3] == b->ne[2] && a->ne[2] == b->ne[1] &&
               a->ne[3] == b->ne[2];
    case TG_OP_SET_ROWS:
        return b && is_index(b->type) && (a->type == TG_TYPE_F32 || a->type == TG_TYPE_F16) && a->ne[0] == dst->ne[0] &&
               b->ne[0] == a->ne[1] && a->ne[2] % b->ne[1] == 0 && a->ne[3] % b->ne[2] == 0 && a->ne[2] == dst->ne[2] &&
               a->ne[3] == dst->ne[3];
    default:
        return false;
    }
}
