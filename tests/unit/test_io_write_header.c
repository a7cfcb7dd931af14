/* The writer refuses, with TG_ERR_INVALID and a message, header data it could
 * not write so that the reader takes it back as it was: backend and buffer type
 * names with characters outside [A-Za-z0-9_.-], repeated or without a NUL
 * inside their array, and meta entries that would not read back as one meta
 * line (a newline in one injected a tensor line).  What it accepts reads back
 * the same.  Tensor records it could not write re-readably are refused too. */
#include "tg-io.h"
#include "tg_test.h"

static const char base[] = "tgraph 1\n"
                           "backends gpu,cpu\n"
                           "meta model=test x=1\n"
                           "buft gpu align=256\n"
                           "buft host align=32\n"
                           "buffers gpu,host\n"
                           "leaf 0 f32 4 1 1 1 none bufid=1 name=x\n";

static struct tg_file *load_base(void) {
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_parse(base, sizeof base - 1, "base.tg", &f));
    return f;
}

/* Both entry points refuse: the file writer and the graph + setup writer. */
static void check_refused(const struct tg_file *f, const char *says) {
    size_t len = 0;
    tg_clear_error();
    char *text = tg_file_write_mem(f, &len);
    CHECK_MSG(text == NULL, "written anyway:\n%s", text ? text : "");
    CHECK_ERR_HAS(says);
    free(text);
    CHECK_STATUS(tg_file_write("/dev/null", f), TG_ERR_INVALID);
    CHECK_ERR_HAS(says);
}

static void check_setup_refused(const struct tg_file *f, const struct tg_io_alloc_setup *setup, const char *says) {
    tg_clear_error();
    char *text = tg_graph_write_alloc_mem(f->graph, setup, NULL, NULL, NULL);
    CHECK_MSG(text == NULL, "written anyway:\n%s", text ? text : "");
    CHECK_ERR_HAS(says);
    free(text);
}

/* Records the reader could not take back: a tensor twice, a source written
 * after its reader, a view of itself, a leaf with an op, a view op without a view source, a
 * buffer id outside the setup. */
static void records_refused(void) {
    static const char text[] = "tgraph 1\nbuft a align=16\nbuffers a,a\n"
                               "leaf 0 f32 4 1 1 1 none name=a\n"
                               "node 1 f32 4 1 1 1 scale src=0 name=b\n"
                               "node 2 f32 4 1 1 1 view src=1 view=1:0 name=v\n";
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_parse(text, sizeof text - 1, "records.tg", &f));
    if (!f) return;
    struct tg_file_tensor first = f->tensors[0];
    f->tensors[0] = f->tensors[1];
    f->tensors[1] = first;
    check_refused(f, "cannot write tensor 'b': its source 'a' is written after it");
    f->tensors[1] = f->tensors[0];
    f->tensors[0] = first;

    struct tg_tensor *last = f->tensors[2].tensor; /* no line refers to it */
    f->tensors[2].tensor = f->tensors[0].tensor;
    check_refused(f, "cannot write tensor 'a': it appears twice in the graph");
    f->tensors[2].tensor = last;

    struct tg_tensor *v = f->tensors[2].tensor, *root = v->view_src;
    v->view_src = v;
    check_refused(f, "cannot write tensor 'v': its view source 'v' is written after it");
    v->view_src = NULL;
    check_refused(f, "cannot write tensor 'v': op 'view' makes a view but it has no view source");
    v->view_src = root;

    f->tensors[1].is_leaf = true;
    check_refused(f, "cannot write tensor 'b' as a leaf: it has op 'scale' and 1 sources");
    f->tensors[1].is_leaf = false;

    f->tensors[1].buffer_id = -1;
    check_refused(f, "cannot write tensor 'b': buffer id -1 is not one of the 2 buffer ids");
    f->tensors[1].buffer_id = 2;
    check_refused(f, "buffer id 2 is not one of the 2 buffer ids");
    f->tensors[1].buffer_id = 1;

    f->tensors[1].placement_backend = 1; /* the file has one backend, cpu */
    check_refused(f, "cannot write tensor 'b': backend index out of the file's 1 backends");
    f->tensors[1].placement_backend = 0;
    f->tensors[1].pinned_backend = 1;
    check_refused(f, "backend index out of the file's 1 backends");
    f->tensors[1].pinned_backend = -1;

    char *again = tg_file_write_mem(f, NULL); /* restored: written again */
    CHECK_MSG(again != NULL, "%s", tg_last_error());
    free(again);
    tg_file_free(f);
}

/* A backends line that starts with cpu is still written: only "cpu" alone is
 * the default the reader assumes without one. */
static void cpu_first_backends_written(void) {
    static const char text[] = "tgraph 1\nbackends cpu,gpu\nleaf 0 f32 4 1 1 1 none buf=weights@cpu name=w\n";
    struct tg_file *f = NULL;
    CHECK_OK(tg_file_parse(text, sizeof text - 1, "cpu_first.tg", &f));
    char *out = f ? tg_file_write_mem(f, NULL) : NULL;
    CHECK_MSG(out && strcmp(out, text) == 0, "got:\n%s", out ? out : tg_last_error());
    free(out);
    tg_file_free(f);
}

int main(void) {
    records_refused();
    cpu_first_backends_written();
    struct tg_file *f = load_base();
    if (!f) return tg_test_finish();

    /* The base file round-trips: the checks below do not refuse everything. */
    char *text = tg_file_write_mem(f, NULL);
    CHECK_MSG(text && strcmp(text, base) == 0, "got:\n%s", text ? text : tg_last_error());
    free(text);

    /* Buffer type names. */
    struct tg_io_buft saved = f->alloc.bufts[0];
    strcpy(f->alloc.bufts[0].name, "my gpu");
    check_refused(f, "buffer type 0 ('my gpu'): its name has a character outside [A-Za-z0-9_.-]");
    check_setup_refused(f, &f->alloc, "buffer type 0 ('my gpu')");
    strcpy(f->alloc.bufts[0].name, "host");
    check_refused(f, "buffer types 0 and 1: both are named 'host'");
    check_setup_refused(f, &f->alloc, "both are named 'host'");
    memset(f->alloc.bufts[0].name, 'g', sizeof f->alloc.bufts[0].name);
    check_refused(f, "its name has no NUL within its 32 bytes");
    f->alloc.bufts[0].name[0] = '\0';
    check_refused(f, "buffer type 0: its name is empty");
    f->alloc.bufts[0] = saved;
    f->alloc.bufts[0].alignment = 24;
    check_refused(f, "buffer type 0 ('gpu'): its alignment 24 is not a power of two");
    check_setup_refused(f, &f->alloc, "its alignment 24 is not a power of two");
    f->alloc.bufts[0] = saved;
    f->alloc.buft_of_id[1] = 2; /* only types 0 and 1 are declared */
    check_refused(f, "cannot write buffer id 1: its buffer type 2 is not declared");
    f->alloc.buft_of_id[1] = 1;

    /* Backend names. */
    strcpy(f->backend_names[0], "my gpu");
    check_refused(f, "backend 0 ('my gpu'): its name has a character outside");
    strcpy(f->backend_names[0], "cpu");
    check_refused(f, "backends 0 and 1: both are named 'cpu'");
    memset(f->backend_names[0], 'b', sizeof f->backend_names[0]);
    check_refused(f, "backend 0 ('bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb...'): its name has no NUL");
    strcpy(f->backend_names[0], "gpu");

    /* Meta entries. */
    char *meta = f->meta[0];
    char injected[] = "a=1\nleaf 9 f32 4 1 1 1 none";
    f->meta[0] = injected;
    check_refused(f, "meta entry 0 ('a=1'): it contains a newline");
    char no_key[] = "=1", no_eq[] = "novalue", blank_key[] = "a b=1", trailing[] = "a=1 ", carriage[] = "a=1\r";
    f->meta[0] = no_key;
    check_refused(f, "it needs KEY=VALUE");
    f->meta[0] = no_eq;
    check_refused(f, "meta entry 0 ('novalue'): it needs KEY=VALUE");
    f->meta[0] = blank_key;
    check_refused(f, "its key contains a blank");
    f->meta[0] = trailing;
    check_refused(f, "it ends in a blank");
    f->meta[0] = carriage;
    check_refused(f, "it ends in a blank");
    f->meta[0] = NULL;
    check_refused(f, "meta entry 0: it is NULL");
    char spaces_inside[] = "note=two words";
    f->meta[0] = spaces_inside;
    text = tg_file_write_mem(f, NULL);
    CHECK(text != NULL);
    struct tg_file *back = NULL;
    if (text) CHECK_OK(tg_file_parse(text, strlen(text), "back.tg", &back));
    if (back) CHECK(back->n_meta == 1 && strcmp(back->meta[0], "note=two words") == 0);
    tg_file_free(back);
    free(text);
    f->meta[0] = meta;

    tg_file_free(f);
    return tg_test_finish();
}
