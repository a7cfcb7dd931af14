/* `tgsched plan --plan ggml --json` against ggml_gallocr (label ggml): for
 * every real graph of corpus/graphs, the command's compute buffer and every
 * planned tensor's offset and size equal what ggml's allocator gives the
 * same graph in ggml's CPU buffer type.  argv[1]: the tgsched binary. */
#include "tg-ggml.h"
#include "tg_test.h"

#include "ggml-cpu.h"
#include "tg-io.h"

#include <dirent.h>

struct planned {
    char name[TG_MAX_NAME];
    size_t offset, size;
};

/* The planned tensors of the command's JSON (docs/json.md: buffers[].tensors,
 * one CPU buffer here); -1 on failure. */
static int run_plan(const char *tgsched, const char *path, struct planned *out, int cap, size_t *buffer_size) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' plan '%s' --plan ggml --json", tgsched, path);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t cap_text = 1 << 20, len = 0;
    char *text = malloc(cap_text);
    for (size_t got; text && (got = fread(text + len, 1, cap_text - 1 - len, p)) > 0;) {
        len += got;
        if (len + 1 == cap_text) {
            char *bigger = realloc(text, cap_text *= 2);
            if (!bigger) free(text);
            text = bigger;
        }
    }
    int rc = pclose(p);
    if (!text || rc != 0) {
        free(text);
        return -1;
    }
    text[len] = '\0';
    int n = 0;
    const char *at = strstr(text, "\"buffers\":[");
    *buffer_size = 0;
    if (at && strstr(at, "\"size\":")) sscanf(strstr(at, "\"size\":"), "\"size\":%zu", buffer_size);
    const char *end = at ? strstr(at, "]}]") : NULL; /* the end of the buffers */
    while (at && n < cap && (at = strstr(at, "{\"name\":\"")) && (!end || at < end)) {
        at += 9;
        const char *q = strchr(at, '"');
        const char *off = q ? strstr(q, "\"offset\":") : NULL;
        if (!off || sscanf(off, "\"offset\":%zu,\"size\":%zu", &out[n].offset, &out[n].size) != 2) break;
        snprintf(out[n].name, sizeof out[n].name, "%.*s", (int)(q - at), at);
        n++;
    }
    free(text);
    return n;
}

static int by_name_offset(const void *pa, const void *pb) {
    const struct planned *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    return c ? c : (a->offset > b->offset) - (a->offset < b->offset);
}

static ggml_backend_buffer_type_t address_only(const struct tg_tensor *t, void *user) {
    (void)t;
    return user;
}

/* ggml_gallocr over the same file: its planned tensors. */
static int plan_in_ggml(const char *path, struct planned *out, int cap, size_t *buffer_size) {
    struct tg_file *f = NULL;
    if (tg_file_load(path, &f) != TG_OK) return -1;
    /* pre-allocated tensors: address space only, on both sides (the 7B weights are 4 GB) */
    struct tg_ggml_buft weights;
    tg_ggml_buft_init(&weights, "weights", 64, 0, GGML_OP_COUNT, 0, false);
    struct tg_gen_buft host;
    tg_gen_buft_init_address_only(&host, "external", 64);
    for (int i = 0; i < f->n_tensors; i++) {
        struct tg_tensor *t = f->tensors[i].tensor;
        if (f->tensors[i].placement != TG_PLACE_NONE && !t->view_src) {
            tg_buffer *b = tg_buft_alloc_buffer(&host.buft, tg_nbytes(t));
            if (!b || tg_tensor_bind(t, b, tg_buffer_get_base(b)) != TG_OK) return -1;
            tg_buffer_set_usage(b, f->tensors[i].placement == TG_PLACE_WEIGHTS ? TG_BUFFER_USAGE_WEIGHTS : TG_BUFFER_USAGE_ANY);
        }
    }
    struct tg_ggml_graph gg;
    struct tg_ggml_import_options io = {.external_buft = address_only, .user = &weights.buft};
    if (tg_ggml_import(f->graph, &io, &gg) != TG_OK) return -1;
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    int n = -1;
    if (ggml_gallocr_alloc_graph(galloc, gg.graph)) {
        n = 0;
        *buffer_size = ggml_gallocr_get_buffer_size(galloc, 0);
        const struct tg_graph *g = f->graph;
        for (int u = 0; u < g->n_leafs + g->n_nodes && n < cap; u++) {
            const struct tg_tensor *t = u < g->n_leafs ? g->leafs[u] : g->nodes[u - g->n_leafs];
            const struct ggml_tensor *x = tg_ggml_lookup(&gg, t);
            if (t->view_src || !x->buffer || ggml_backend_buffer_get_usage(x->buffer) != GGML_BACKEND_BUFFER_USAGE_COMPUTE) continue;
            snprintf(out[n].name, sizeof out[n].name, "%s", t->name);
            out[n].offset = (size_t)((char *)x->data - (char *)ggml_backend_buffer_get_base(x->buffer));
            out[n].size = ggml_backend_buft_get_alloc_size(ggml_backend_cpu_buffer_type(), x);
            n++;
        }
    }
    ggml_gallocr_free(galloc);
    tg_ggml_graph_free(&gg);
    /* the external buffers: owned by nobody else; freed with their tensors' file */
    for (int i = 0; i < f->n_tensors; i++) {
        struct tg_tensor *t = f->tensors[i].tensor;
        if (f->tensors[i].placement != TG_PLACE_NONE && !t->view_src) tg_buffer_free(t->buffer);
    }
    tg_file_free(f);
    return n;
}

int main(int argc, char **argv) {
    tg_ggml_quiet_log();
    CHECK(argc == 2);
    if (argc != 2) return tg_test_finish();
    DIR *d = opendir("corpus/graphs");
    CHECK(d != NULL);
    int files = 0;
    struct dirent *e;
    enum { CAP = 4096 };
    struct planned *a = calloc(CAP, sizeof *a), *b = calloc(CAP, sizeof *b);
    while (d && (e = readdir(d))) {
        if (!strstr(e->d_name, ".tg")) continue;
        char path[512];
        snprintf(path, sizeof path, "corpus/graphs/%s", e->d_name);
        size_t size_cli = 0, size_ggml = 0;
        int n_cli = run_plan(argv[1], path, a, CAP, &size_cli);
        int n_ggml = plan_in_ggml(path, b, CAP, &size_ggml);
        /* the same tensors at the same offsets, whatever the order each lists them in */
        if (n_cli > 0) qsort(a, (size_t)n_cli, sizeof *a, by_name_offset);
        if (n_ggml > 0) qsort(b, (size_t)n_ggml, sizeof *b, by_name_offset);
        int differ = 0;
        for (int i = 0; i < n_cli && i < n_ggml; i++) {
            differ += strcmp(a[i].name, b[i].name) != 0 || a[i].offset != b[i].offset || a[i].size != b[i].size;
        }
        printf("%s: tgsched plan --plan ggml %zu bytes, %d tensors; ggml_gallocr %zu bytes, %d tensors; %d differ\n",
               path, size_cli, n_cli, size_ggml, n_ggml, differ);
        CHECK(n_cli > 0 && n_cli == n_ggml && size_cli == size_ggml && differ == 0);
        files++;
    }
    if (d) closedir(d);
    free(a);
    free(b);
    CHECK(files >= 5);
    return tg_test_finish();
}
