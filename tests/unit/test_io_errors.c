/* Every error class of the `.tg` format is rejected with TG_ERR_INVALID and a
 * message "NAME:LINE: sentence" naming the right line and the problem; a file
 * that cannot be opened is TG_ERR_IO naming the path and the system's reason. */
#include "tg-io.h"
#include "tg_test.h"

#define HEAD "tgraph 1\n"
#define A "leaf 0 f32 4 3 1 1 none name=a\n"

static const struct {
    const char *text;
    int line;
    const char *says;
} bad[] = {
    {"", 1, "missing header"},
    {"# only a comment\n\n", 2, "missing header"},
    {"tgraph 2\n", 1, "unsupported format version '2'"},
    {"tgraph\n", 1, "lacks its version"},
    {"tgraph 1 extra\n", 1, "unexpected 'extra'"},
    {A, 1, "missing header"},
    {HEAD "tgraph 1\n", 2, "second 'tgraph'"},
    {HEAD "tensor 0 f32 4 1 1 1 none\n", 2, "unknown line kind 'tensor'"},
    {HEAD "leaf 0 f33 4 1 1 1 none\n", 2, "unknown type 'f33'"},
    {HEAD "leaf 0 f32 4 1 1 1 none foo=1\n", 2, "unknown key 'foo'"},
    {HEAD "leaf 0 f32 4 1 1 1 none name\n", 2, "not a key=value pair"},
    {HEAD A "node 1 f32 4 3 1 1 frobnicate src=0\n", 3, "unknown op 'frobnicate'"},
    {HEAD "leaf 0 f32 4 1 1 1 none flags=input,shiny\n", 2, "unknown flag 'shiny'"},
    {HEAD A "node 1 f32 4 3 1 1 add src=0,7\n", 3, "source 7 is not defined on an earlier line"},
    {HEAD A "node 1 f32 4 3 1 1 add src=0,2\nleaf 2 f32 4 3 1 1 none\n", 3, "source 2 is not defined"},
    {HEAD A "\n# comment\nleaf 0 f32 4 1 1 1 none\n", 5, "duplicate id 0: already defined on line 2"},
    {HEAD "leaf -1 f32 4 1 1 1 none\n", 2, "id '-1' is not a non-negative integer"},
    {HEAD "leaf 99999999999999999999 f32 4 1 1 1 none\n", 2, "too large"},
    {HEAD "leaf 0 f32 4 0 1 1 none\n", 2, "ne1 is 0: every dimension must be >= 1"},
    {HEAD "leaf 0 f32 4 1 -3 1 none\n", 2, "ne2 is '-3'"},
    {HEAD "leaf 0 f32 4 1 1 99999999999999999999 none\n", 2, "ne3 '99999999999999999999' overflows"},
    {HEAD "leaf 0 f32 4 1 1 x1 none\n", 2, "ne3 'x1' is not an integer"},
    {HEAD "leaf 0 f32 2305843009213693952 2 1 1 none\n", 2, "overflows size_t"},
    {HEAD "leaf 0 f32 4 3 1 1 none nb=4,9223372036854775807,16,16\n", 2, "overflows size_t"},
    {HEAD "leaf 0 q4_0 33 1 1 1 none\n", 2, "not a multiple of q4_0's block size 32"},
    {HEAD A "node 1 f32 4 1 1 1 view src=0 view=0:40\n", 3, "falls outside its source, tensor 0 'a', of 48 bytes"},
    {HEAD "leaf 0 f32 4 1 1 1 none\nnode 1 f32 4 1 1 1 view src=0 view=0:4\n", 3,
     "falls outside its source, tensor 0 (unnamed), of 16 bytes"},
    {HEAD A "node 1 f32 4 1 1 1 view src=0 view=0:32\nnode 2 f32 4 1 1 1 view src=1 view=1:8\n", 4,
     "view of 16 bytes at offset 40 (8 into tensor 1 (unnamed), itself a view at offset 32) falls outside the memory "
     "of its root, tensor 0 'a', of 48 bytes"},
    {HEAD A "node 1 f32 4 3 1 1 view src=0 view=0:4\n", 3, "falls outside"},
    /* an offset past the root's end: its room left would wrap below zero */
    {HEAD A "node 1 f32 1 1 1 1 view src=0 view=0:100\n", 3, "view of 4 bytes at offset 100 falls outside"},
    {HEAD A "node 1 f32 4 1 1 1 view src=0 view=0:99999999999999999999999\n", 3, "overflows size_t"},
    {HEAD A "node 1 f32 4 1 1 1 view src=0 view=0\n", 3, "view= needs ID:OFFSET"},
    {HEAD A "node 1 f32 4 1 1 1 view src=0 view=1:0\n", 3, "names the tensor itself"},
    {HEAD A "node 1 f32 4 1 1 1 view src=0 view=5:0\n", 3, "view source 5 is not defined"},
    {HEAD A "node 1 f32 4 3 1 1 reshape src=0\n", 3, "needs view=ID:OFFSET"},
    {HEAD "leaf 0 f32 4 1 1 1 add\n", 2, "a leaf has op 'add'"},
    {HEAD A "leaf 1 f32 4 3 1 1 none src=0\n", 3, "leafs have no sources"},
    {HEAD A "node 1 f32 4 3 1 1 custom src=0,0,0,0,0,0,0,0,0,0,0\n", 3, "more than 10 sources"},
    {HEAD A "node 1 f32 4 3 1 1 add src=0,-\n", 3, "ends with an empty slot"},
    {HEAD A "node 1 f32 4 3 1 1 add src=\n", 3, "'src' has an empty value"},
    {HEAD A "node 1 f32 4 3 1 1 add src=0,,0\n", 3, "source '' is not a tensor id"},
    {HEAD A "node 1 f32 4 3 1 1 scale src=0 params=1.5\n", 3, "params word 0 '1.5' is not a number"},
    {HEAD A "node 1 f32 4 3 1 1 scale src=0 params=0,0x1g\n", 3, "params word 1 '0x1g'"},
    {HEAD A "node 1 f32 4 3 1 1 scale src=0 params=0x100000000\n", 3, "does not fit in 32 bits"},
    {HEAD A "node 1 f32 4 3 1 1 scale src=0 params=4294967296\n", 3, "does not fit in 32 bits"},
    {HEAD A "node 1 f32 4 3 1 1 scale src=0 params=-2147483649\n", 3, "params word 0 '-2147483649' does not fit"},
    {HEAD A "node 1 f32 4 3 1 1 scale src=0 params=1,0x\n", 3, "params word 1 '0x' is not a number"},
    {HEAD A "node 1 f32 4 3 1 1 scale src=0 params=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\n", 3, "more than 16 words"},
    {HEAD "leaf 0 f32 4 1 1 1 none buf=weights@gpu0\n", 2, "buf= names backend 'gpu0', which is not in the backends line (without one, the only backend is cpu"},
    {HEAD "backends gpu0,cpu\nleaf 0 f32 4 1 1 1 none backend=gpu1\n", 3, "backend= names backend 'gpu1'"},
    {HEAD "leaf 0 f32 4 1 1 1 none buf=heap\n", 2, "buf= must be weights[@BACKEND] or data[@BACKEND]"},
    {HEAD "leaf 0 f32 4 1 1 1 none buf=weights@\n", 2, "buf=weights@ has no backend name after '@'"},
    {HEAD "backends gpu,cpu\nleaf 0 f32 4 1 1 1 none buf=data@\n", 3, "buf=data@ has no backend name after '@'"},
    {HEAD "buft a align=16 pad=add:\n", 2, "pad=add: has no byte count after ':'"},
    {HEAD "buft a align=16 pad=add:x1\n", 2, "pad=add:x1: the byte count 'x1' is not a non-negative integer"},
    {HEAD "buft a align=16 pad=add:99999999999999999999\n", 2, "pad=add:99999999999999999999: the byte count overflows"},
    {HEAD "buft a align=16 max=1 max=2\n", 2, "key 'max' is given twice"},
    {HEAD "buft a align=16 pad=add:1 pad=add:2\n", 2, "key 'pad' is given twice"},
    {HEAD "buft a align=16 max=\n", 2, "max= has no value"},
    {HEAD "buft a align=16 max=-1\n", 2, "max=-1 is not a non-negative integer"},
    {HEAD "buft a align=16 max=99999999999999999999\n", 2, "max=99999999999999999999 overflows size_t"},
    {HEAD "buft a align=16 pad=:4\n", 2, "pad= names no op: ':4'"},
    {HEAD "buft\n", 2, "'buft' needs a name and align=N"},
    {HEAD "buft abcdefghijklmnopqrstuvwxyz0123456789 align=16\n", 2, "is longer than 31 characters"},
    {HEAD "buft a align=16\nbuffers\n", 3, "'buffers' needs a comma-separated list"},
    {HEAD "buft a align=16\nbuffers a b\n", 3, "unexpected 'b' after the buffers list"},
    {HEAD "buft a align=16\nbuffers a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a\n", 3, "more than 16 buffer ids"},
    {HEAD "buft a align=16\nbuffers a,\n", 3, "buffer id 1 names buffer type '', which no earlier 'buft' line"},
    {HEAD "buft a align=16\nbuffers a\nleaf 0 f32 4 1 1 1 none bufid=0 bufid=0\n", 4, "key 'bufid' is given twice"},
    {HEAD "backends g,cpu\nleaf 0 f32 4 1 1 1 none backend=g backend=g\n", 3, "key 'backend' is given twice"},
    {HEAD "buft a align=\n", 2, "align= has no value"},
    {"\xEF\xBB\xBFtgraph 1\nleaf 0 f32 4 1 1 1 none\n", 1, "starts with a UTF-8 byte-order mark (bytes EF BB BF)"},
    {HEAD A "backends gpu0,cpu\n", 3, "must come before the first tensor line"},
    {HEAD A "meta n_ctx=4\n", 3, "must come before the first tensor line"},
    {HEAD "backends gpu0\nbackends cpu\n", 3, "a second 'backends' line"},
    {HEAD "backends gpu0,gpu0\n", 2, "listed twice"},
    {HEAD "backends gpu0, cpu\n", 2, "separated by commas, not spaces"},
    {HEAD "backends gpu0,,cpu\n", 2, "empty backend name"},
    /* 32 characters: one more than a name's array holds with its NUL */
    {HEAD "backends a2345678901234567890123456789012,cpu\n", 2, "is longer than 31 characters"},
    {HEAD "backends gpu/0\n", 2, "outside [A-Za-z0-9_.-]"},
    {HEAD "backends a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q\n", 2, "more than 16 backends"},
    {HEAD "meta novalue\n", 2, "'meta' needs KEY=VALUE"},
    {HEAD "leaf 0 f32 4 1 1 1 none name=a name=b\n", 2, "key 'name' is given twice"},
    {HEAD "leaf 0 f32 4 1 1\n", 2, "ends before its NE3 field"},
    {HEAD "leaf 0 f32 4 1 1 1 none nb=4,16,16\n", 2, "exactly 4 strides"},
    {HEAD "leaf 0 f32 4 1 1 1 none nb=4,16,16,-1\n", 2, "nb3 '-1' is not a non-negative integer"},
    {HEAD A "node 1 f32 4 3 1 1 view src=0 view=0:0 buf=data\n", 3, "a view cannot have buf="},
    {HEAD "leaf 0 f32 4 1 1 1 none name=a23456789012345678901234567890123456789012345678901234567890123456\n", 2,
     "longer than 63 characters"},
    /* 64 characters: one more than the name's array holds with its NUL */
    {HEAD "leaf 0 f32 4 1 1 1 none name=a234567890123456789012345678901234567890123456789012345678901234\n", 2,
     "longer than 63 characters"},
};

static void check_rejected(const char *text, size_t len, int line, const char *says) {
    struct tg_file *f = (struct tg_file *)1;
    tg_clear_error();
    CHECK_STATUS(tg_file_parse(text, len, "bad.tg", &f), TG_ERR_INVALID);
    CHECK(f == NULL);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "bad.tg:%d: ", line);
    CHECK_MSG(strncmp(tg_last_error(), prefix, strlen(prefix)) == 0, "message '%s' does not start with '%s' (input: %s)",
              tg_last_error(), prefix, text);
    CHECK_ERR_HAS(says);
}

static void check_file_rejected(const char *path, int line, const char *says) {
    struct tg_file *f = NULL;
    CHECK_STATUS(tg_file_load(path, &f), TG_ERR_INVALID);
    CHECK(f == NULL);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
    CHECK_MSG(strncmp(tg_last_error(), prefix, strlen(prefix)) == 0, "message '%s' lacks prefix '%s'", tg_last_error(),
              prefix);
    CHECK_ERR_HAS(says);
    CHECK(tg_file_read(path) == NULL);
}

int main(void) {
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) check_rejected(bad[i].text, strlen(bad[i].text), bad[i].line, bad[i].says);

    /* A NUL byte in the middle of a line (binary data), and no trailing newline. */
    static const char with_nul[] = "tgraph 1\nleaf 0 f32 4 1\0 1 1 none\n";
    check_rejected(with_nul, sizeof with_nul - 1, 2, "NUL byte");

    /* The bad inputs kept as files (also used by the command-line tests). */
    check_file_rejected("tests/io/bad_version.tg", 1, "unsupported format version");
    check_file_rejected("tests/io/later_source.tg", 5, "source 2 is not defined on an earlier line");
    check_file_rejected("tests/io/view_out_of_range.tg", 3, "falls outside its source, tensor 0 'a', of 64 bytes");
    check_file_rejected("tests/io/too_many_sources.tg", 3, "more than 10 sources");
    /* a dilated kernel of ~2^64 elements: no output (its size overflowed int64 in the rule, UBSan) */
    check_file_rejected("tests/io/im2col_kernel_past_int64.tg", 4, "at least the (dilated) kernel's size");
    check_file_rejected("tests/io/unknown_backend.tg", 3, "backend 'gpu1'");
    check_file_rejected("tests/io/duplicate_id.tg", 3, "duplicate id 0: already defined on line 2");

    /* Files that cannot be read: the path and the system's reason. */
    struct tg_file *f = (struct tg_file *)1;
    CHECK_STATUS(tg_file_load("tests/io/no-such-file.tg", &f), TG_ERR_IO);
    CHECK(f == NULL);
    CHECK_ERR_HAS("tests/io/no-such-file.tg");
    CHECK_ERR_HAS("No such file or directory");
    char long_path[3000]; /* the reason still ends the message (too long a name for the system) */
    memset(long_path, 'd', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    CHECK_STATUS(tg_file_load(long_path, &f), TG_ERR_IO);
    CHECK_ERR_HAS("': File name too long");
    CHECK_STATUS(tg_file_load("tests/io", &f), TG_ERR_IO);
    CHECK_ERR_HAS("tests/io");
    CHECK_STATUS(tg_file_load(NULL, &f), TG_ERR_INVALID);

    /* The same inputs with the errors fixed are accepted: the checks above are not
     * rejecting everything. */
    static const char fine[] = HEAD "backends gpu0,cpu\nmeta n=1\n" A
        "node 1 f32 4 1 1 1 view src=0 view=0:32\n"
        "node 2 f32 4 3 1 1 custom src=0,0,0,0,0,0,0,0,0,0 params=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,0xffffffff\n"
        "leaf 3 q4_0 32 1 1 1 none buf=weights@gpu0 backend=cpu x-note=anything\n";
    CHECK_OK(tg_file_parse(fine, sizeof fine - 1, "fine.tg", &f));
    tg_file_free(f);
    /* Backend names of every allowed character, the longest (31) included. */
    static const char names[] = HEAD "backends Gpu.0_x-y,a234567890123456789012345678901\n"
                                "leaf 0 f32 4 1 1 1 none buf=weights@Gpu.0_x-y\nleaf 1 f32 4 1 1 1 none\n";
    CHECK_OK(tg_file_parse(names, sizeof names - 1, "names.tg", &f));
    if (f) CHECK(f->n_backends == 2 && strcmp(f->backend_names[0], "Gpu.0_x-y") == 0 && f->tensors[0].placement_backend == 0);
    if (f) CHECK(f->tensors[1].placement_backend == 1); /* without buf=, the default: the last backend */
    tg_file_free(f);
    /* A meta line's value loses the blanks around it (a CRLF file's '\r' too). */
    static const char meta[] = HEAD "meta   n_ctx=512 \t\r\n";
    CHECK_OK(tg_file_parse(meta, sizeof meta - 1, "meta.tg", &f));
    if (f) CHECK(f->n_meta == 1 && strcmp(f->meta[0], "n_ctx=512") == 0);
    tg_file_free(f);
    /* The longest name (63 characters), and name= alone: an unnamed tensor. */
    static const char named[] = HEAD "leaf 0 f32 4 1 1 1 none name=a23456789012345678901234567890123456789012345678901234567890123\n"
                                "leaf 1 f32 4 1 1 1 none name=\n";
    CHECK_OK(tg_file_parse(named, sizeof named - 1, "named.tg", &f));
    if (f) CHECK(strlen(f->tensors[0].tensor->name) == 63 && f->tensors[1].tensor->name[0] == '\0');
    tg_file_free(f);
    /* params words at their limits: the int32 minimum, hex digits of either case. */
    static const char words[] = HEAD A "node 1 f32 4 3 1 1 scale src=0 params=-2147483648,0XFFFFFFFF,0xAbCdEf\n";
    CHECK_OK(tg_file_parse(words, sizeof words - 1, "words.tg", &f));
    if (f) {
        const int32_t *p = f->tensors[1].tensor->op_params;
        CHECK(p[0] == INT32_MIN && (uint32_t)p[1] == 0xffffffffu && p[2] == 0xabcdef);
    }
    tg_file_free(f);
    /* A view of a view need only lie inside the root (as ggml checks it): here
     * 16 bytes of a view of 8 bytes, all inside the root's 48. */
    static const char view_of_view[] = HEAD A "node 1 f32 2 1 1 1 view src=0 view=0:8\n"
        "node 2 f32 4 1 1 1 view src=1 view=1:0\n";
    CHECK_OK(tg_file_parse(view_of_view, sizeof view_of_view - 1, "views.tg", &f));
    if (f) CHECK(f->tensors[2].tensor->view_src == f->tensors[0].tensor && f->tensors[2].tensor->view_offs == 8);
    tg_file_free(f);
    return tg_test_finish();
}
