/* The writer refuses, with TG_ERR_INVALID and a message, header data it could
 * not write so that the reader takes it back as it was: backend and buffer type
 * names with characters outside [A-Za-z0-9_.-], repeated or without a NUL
 * inside their array, and meta entries that would not read back as one meta
 * line (a newline in one injected a tensor line).  What it accepts reads back
 * the same. */
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

int main(void) {
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
