/* Every corpus graph loads with the node/leaf counts of corpus/README (copied
 * from ../shared/graphs/README.md), the export's conventions hold after loading
 * (views point at roots, ggml_cast's self-source), and the writer reproduces
 * each file byte for byte, re-reading to the same graph. */
#include "tg-io.h"
#include "tg_test.h"

static const struct {
    const char *path;
    int n_nodes;
    int n_leafs;
} corpus[] = {
    {"corpus/graphs/llama-tiny-prefill32.tg", 80, 31},
    {"corpus/graphs/tinyllama-1.1b-prefill512.tg", 798, 251},
    {"corpus/graphs/tinyllama-1.1b-decode.tg", 796, 250},
    {"corpus/graphs/llama-7b-prefill512-flash.tg", 999, 361},
    {"corpus/graphs/llama-7b-decode-flash.tg", 997, 360},
};

static char *read_all(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, fp) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(fp);
    if (s) s[n] = '\0';
    *len = (size_t)n;
    return s;
}

static int record_index(const struct tg_file *f, const struct tg_tensor *t) {
    const struct tg_file_tensor *r = tg_file_find(f, t);
    return r ? (int)(r - f->tensors) : -1;
}

/* Same graph: every record and tensor field, references compared by position. */
static bool same_file(const struct tg_file *a, const struct tg_file *b) {
    if (a->n_tensors != b->n_tensors || a->n_backends != b->n_backends || a->n_meta != b->n_meta) return false;
    if (a->graph->n_nodes != b->graph->n_nodes || a->graph->n_leafs != b->graph->n_leafs) return false;
    for (int i = 0; i < a->n_backends; i++) {
        if (strcmp(a->backend_names[i], b->backend_names[i]) != 0) return false;
    }
    for (int i = 0; i < a->n_meta; i++) {
        if (strcmp(a->meta[i], b->meta[i]) != 0) return false;
    }
    for (int i = 0; i < a->n_tensors; i++) {
        const struct tg_file_tensor *ra = &a->tensors[i], *rb = &b->tensors[i];
        const struct tg_tensor *ta = ra->tensor, *tb = rb->tensor;
        if (ra->id != rb->id || ra->is_leaf != rb->is_leaf || ra->placement != rb->placement ||
            ra->placement_backend != rb->placement_backend || ra->pinned_backend != rb->pinned_backend) {
            return false;
        }
        if (ta->type != tb->type || ta->op != tb->op || ta->flags != tb->flags || ta->view_offs != tb->view_offs ||
            memcmp(ta->ne, tb->ne, sizeof ta->ne) != 0 || memcmp(ta->nb, tb->nb, sizeof ta->nb) != 0 ||
            memcmp(ta->op_params, tb->op_params, sizeof ta->op_params) != 0 || strcmp(ta->name, tb->name) != 0) {
            return false;
        }
        for (int s = 0; s < TG_MAX_SRC; s++) {
            if ((ta->src[s] == NULL) != (tb->src[s] == NULL)) return false;
            if (ta->src[s] && record_index(a, ta->src[s]) != record_index(b, tb->src[s])) return false;
        }
        if ((ta->view_src == NULL) != (tb->view_src == NULL)) return false;
        if (ta->view_src && record_index(a, ta->view_src) != record_index(b, tb->view_src)) return false;
    }
    return true;
}

static void check_conventions(const struct tg_file *f) {
    int graph_leaf = 0, graph_node = 0;
    bool order_ok = true, views_ok = true, weights_seen = false, data_seen = false;
    for (int i = 0; i < f->n_tensors; i++) {
        const struct tg_file_tensor *r = &f->tensors[i];
        if (r->is_leaf) order_ok &= f->graph->leafs[graph_leaf++] == r->tensor;
        else order_ok &= f->graph->nodes[graph_node++] == r->tensor;
        if (r->tensor->view_src) {
            views_ok &= r->tensor->view_src->view_src == NULL;
            views_ok &= r->tensor->view_offs + tg_nbytes(r->tensor) <= tg_nbytes(r->tensor->view_src);
        }
        weights_seen |= r->placement == TG_PLACE_WEIGHTS;
        data_seen |= r->placement == TG_PLACE_DATA;
        CHECK(r->placement_backend == f->n_backends - 1);
        CHECK(r->pinned_backend == -1);
    }
    CHECK(order_ok);
    CHECK(views_ok);
    CHECK(weights_seen && data_seen);
    CHECK(f->n_backends == 1 && strcmp(f->backend_names[0], "cpu") == 0);
    CHECK(f->n_meta > 5 && strncmp(f->meta[0], "source=", 7) == 0);
}

int main(void) {
    for (size_t c = 0; c < sizeof corpus / sizeof corpus[0]; c++) {
        size_t len = 0;
        char *text = read_all(corpus[c].path, &len);
        CHECK_MSG(text != NULL, "cannot read %s", corpus[c].path);
        if (!text) continue;

        struct tg_file *f = NULL;
        CHECK_OK(tg_file_load(corpus[c].path, &f));
        if (!f) {
            free(text);
            continue;
        }
        CHECK_MSG(f->graph->n_nodes == corpus[c].n_nodes, "%s: %d nodes", corpus[c].path, f->graph->n_nodes);
        CHECK_MSG(f->graph->n_leafs == corpus[c].n_leafs, "%s: %d leafs", corpus[c].path, f->graph->n_leafs);
        CHECK(f->n_tensors == corpus[c].n_nodes + corpus[c].n_leafs);
        check_conventions(f);

        /* The corpus is written canonically, so the writer must give it back unchanged. */
        size_t len1 = 0;
        char *w1 = tg_file_write_mem(f, &len1);
        CHECK_MSG(w1 != NULL, "%s", tg_last_error());
        CHECK_MSG(w1 && len1 == len && memcmp(w1, text, len) == 0, "%s: writer output differs from the file",
                  corpus[c].path);

        struct tg_file *f2 = w1 ? tg_file_read_mem(w1, len1, "rewritten") : NULL;
        CHECK_MSG(f2 != NULL, "%s", tg_last_error());
        if (f2) {
            CHECK(same_file(f, f2));
            size_t len2 = 0;
            char *w2 = tg_file_write_mem(f2, &len2);
            CHECK(w2 && len2 == len1 && memcmp(w1, w2, len1) == 0);
            free(w2);
        }
        tg_file_free(f2);
        free(w1);
        tg_file_free(f);
        free(text);
    }

    /* ggml_cast in the flash graphs: kq_mask_f16 is its own second source. */
    struct tg_file *flash = tg_file_read("corpus/graphs/llama-7b-decode-flash.tg");
    CHECK(flash != NULL);
    if (flash) {
        struct tg_tensor *mask = tg_context_get_tensor(flash->ctx, "kq_mask_f16");
        CHECK(mask && mask->op == TG_OP_CPY && mask->src[1] == mask && mask->type == TG_TYPE_F16);
        struct tg_tensor *out = tg_context_get_tensor(flash->ctx, "output.weight");
        CHECK(out && out->type == TG_TYPE_Q6_K && out->ne[0] == 4096 && out->ne[1] == 32000);
        const struct tg_file_tensor *rec = out ? tg_file_find(flash, out) : NULL;
        CHECK(rec && rec->is_leaf && rec->placement == TG_PLACE_WEIGHTS);
        CHECK(tg_file_find(flash, NULL) == NULL);
    }
    tg_file_free(flash);
    return tg_test_finish();
}
