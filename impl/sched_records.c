/* The scheduler's per-tensor records (backend, reason, copied source), dense
 * in the order they were made, the accessors of a tensor's record, and the
 * reasons' names.
 *
 * Lookups sit on the per-token path (every pass asks for the backend of every
 * node and source), so a tensor carries a stamp naming its record: an epoch
 * unique to this schedule and the record's index.  A stamp is only a hint: a
 * hit is confirmed against the record, and a miss is trusted only while no
 * other schedule has begun since this one (another scheduler may share the
 * tensor and have overwritten the stamp).  Otherwise a hash index, built
 * lazily from the dense list, answers. */
#include "sched-impl.h"

#include <stdlib.h>
#include <string.h>

uint64_t sched_epoch_counter;

static const char *const reason_names[TG_REASON_COUNT] = {
    "none", "pre-allocated", "user pin", "input->cpu", "weights", "offload", "expand gpu down",
    "expand gpu up", "expand down", "expand up", "upgrade", "most sources", "first supporting",
    "view source", "follow consumer", "split copy",
};

/* Here with the records that hold the reasons: every file above names them. */
const char *tg_sched_reason_name(enum tg_sched_reason r) {
    return (unsigned)r < TG_REASON_COUNT ? reason_names[r] : "?";
}

struct sched_records *sched_records_new(size_t capacity) {
    struct sched_records *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    if (capacity > (size_t)0x7fffffff) capacity = 0x7fffffff;
    r->cap = (int)capacity;
    r->use_stamps = capacity <= SCHED_REC_MAX_STAMPED;
    r->tensor = calloc(capacity, sizeof *r->tensor);
    r->backend = calloc(capacity, sizeof *r->backend);
    r->reason = calloc(capacity, sizeof *r->reason);
    r->copy_of = calloc(capacity, sizeof *r->copy_of);
    bool ok = r->tensor && r->backend && r->reason && r->copy_of && tg_hash_init(&r->index, capacity);
    r->index_rec = ok ? calloc(r->index.size, sizeof *r->index_rec) : NULL;
    if (!r->index_rec) {
        sched_records_free(r);
        return NULL;
    }
    sched_records_clear(r);
    return r;
}

void sched_records_free(struct sched_records *r) {
    if (!r) return;
    free(r->tensor);
    free(r->backend);
    free(r->reason);
    free(r->copy_of);
    tg_hash_free(&r->index);
    free(r->index_rec);
    free(r);
}

void sched_records_clear(struct sched_records *r) {
    r->n = 0;
    if (r->n_indexed > 0) tg_hash_clear(&r->index); /* the index is built only when a stamp cannot answer */
    r->n_indexed = 0;
    r->epoch = __atomic_add_fetch(&sched_epoch_counter, 1, __ATOMIC_SEQ_CST);
}

int sched_records_find_indexed(struct sched_records *r, const struct tg_tensor *t) {
    for (; r->n_indexed < r->n; r->n_indexed++) {
        size_t slot = tg_hash_insert(&r->index, r->tensor[r->n_indexed]);
        if (slot == TG_HASH_FULL) abort(); /* the index holds at least cap records: cannot fill */
        r->index_rec[slot] = r->n_indexed;
    }
    size_t slot = tg_hash_find(&r->index, t);
    return slot == TG_HASH_FULL ? -1 : r->index_rec[slot];
}

/* ---- the fields of a tensor's record ---------------------------------------------------------- */

int sched_rec_backend(const tg_sched *s, const struct tg_tensor *t) {
    int i = sched_records_find(s->recs, t);
    return i < 0 ? -1 : s->recs->backend[i];
}

enum tg_sched_reason sched_rec_reason(const tg_sched *s, const struct tg_tensor *t) {
    int i = sched_records_find(s->recs, t);
    return i < 0 ? TG_REASON_NONE : (enum tg_sched_reason)s->recs->reason[i];
}

struct tg_tensor *sched_rec_copy_of(const tg_sched *s, const struct tg_tensor *t) {
    int i = sched_records_find(s->recs, t);
    return i < 0 ? NULL : s->recs->copy_of[i];
}

enum tg_status sched_rec_set(tg_sched *s, const struct tg_tensor *t, int backend_id, enum tg_sched_reason reason) {
    int i = sched_records_find(s->recs, t);
    if (i < 0) i = sched_records_add(s->recs, t);
    if (i < 0) {
        return tg_fail(TG_ERR_INVALID, "scheduler table is full at tensor '%s': create the scheduler with a "
                       "larger graph_size", t->name);
    }
    s->recs->backend[i] = backend_id;
    s->recs->reason[i] = (unsigned char)reason;
    return TG_OK;
}
