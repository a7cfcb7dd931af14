/* Graphs ggml would refuse to build are refused when read, each with the
 * file, line, node, op and rule (impl/op_rules.c); the same graphs built
 * through the API give NULL and the rule; every rule is reached by a case
 * here (and by a seed in corpus/fuzz_tg_read). */
#include "tg-io.h"
#include "tg_test.h"

struct rule_case {
    const char *what, *text, *want; /* want: NULL = accepted, else a part of the message */
};

#define HEAD "tgraph 1\nleaf 0 f32 64 8 1 1 none name=a\nleaf 1 f32 64 4 1 1 none name=b\n"

static const struct rule_case cases[] = {
    /* the three the issue found accepted */
    {"mul_mat inner dims", HEAD "leaf 2 f32 32 4 1 1 none name=c\nnode 3 f32 8 4 1 1 mul_mat src=0,2 name=m\n",
     "in.tg:5: node 3 'm' (op mul_mat) breaks a rule of its op: the shared dimension: ne0 of source 0 (64) = ne0 of source 1 (32)"},
    {"mul_mat reads itself", HEAD "node 2 f32 8 4 1 1 mul_mat src=0,2 name=m\n", "source 1 is the node itself"},
    {"computed node without strides", HEAD "node 2 f32 8 4 1 1 mul_mat src=0,1 nb=0,0,0,0 name=m\n",
     "a result that is not a view is contiguous (nb 0,0,0,0"},
    /* shapes and types of results */
    {"mul_mat ok", HEAD "node 2 f32 8 4 1 1 mul_mat src=0,1 name=m\n", NULL},
    {"mul_mat result shape", HEAD "node 2 f32 8 5 1 1 mul_mat src=0,1 name=m\n", "the result is [8, 4, 1, 1]"},
    {"mul_mat result type", HEAD "node 2 f16 8 4 1 1 mul_mat src=0,1 name=m\n", "the result is f32"},
    {"mul_mat transposed weights",
     HEAD "node 2 f32 8 64 1 1 transpose src=0 view=0:0 nb=256,4,2048,2048 params=1,0,2,3 name=t\n"
          "leaf 3 f32 8 2 1 1 none name=x\nnode 4 f32 64 2 1 1 mul_mat src=2,3 name=m\n",
     "source 0 is not transposed"},
    {"mul_mat broadcast", HEAD "leaf 2 f32 64 8 3 1 none name=w\nleaf 3 f32 64 4 2 1 none name=x\n"
                          "node 4 f32 8 4 2 1 mul_mat src=2,3 name=m\n",
     "source 0's dims 2-3 broadcast over source 1's"},
    {"add broadcast", HEAD "leaf 2 f32 64 3 1 1 none name=c\nnode 3 f32 64 8 1 1 add src=0,2 name=s\n",
     "source 1 [64, 3, 1, 1] repeats into source 0 [64, 8, 1, 1]"},
    {"add result type", HEAD "node 2 f16 64 8 1 1 add src=0,0 name=s\n", "the result has source 0's type (f32)"},
    {"add missing source", HEAD "node 2 f32 64 8 1 1 add src=0 name=s\n", "needs sources 0 and 1"},
    {"in-place add ok", HEAD "node 2 f32 64 8 1 1 add src=0,0 view=0:0 name=s\n", NULL},
    {"in-place view of another", HEAD "node 2 f32 64 4 1 1 add src=1,1 view=0:0 name=s\n",
     "the result is a view of source 0"},
    {"mul_mat cannot be a view", HEAD "node 2 f32 8 4 1 1 mul_mat src=0,1 view=0:0 name=m\n",
     "mul_mat makes a new tensor: it cannot be a view"},
    {"unary sub-op", HEAD "node 2 f32 64 8 1 1 unary src=0 params=99 name=u\n", "params word 0 is a unary op"},
    {"unary packed rows", HEAD "node 2 f32 8 64 1 1 transpose src=0 view=0:0 nb=256,4,2048,2048 params=1,0,2,3 name=t\n"
                          "node 3 f32 8 64 1 1 unary src=2 params=10 name=u\n",
     "source 0's rows are packed"},
    {"glu fused halves", HEAD "leaf 2 f32 63 2 1 1 none name=o\nnode 3 f32 31 2 1 1 glu src=2 params=2 name=g\n",
     "fused form: source 0's ne0 (63) holds two halves"},
    {"glu split shape", HEAD "node 2 f32 64 8 1 1 glu src=0,1 params=2 name=g\n", "split form: source 1 has source 0's type and shape"},
    {"glu fused ok", HEAD "node 2 f32 32 8 1 1 glu src=0 params=2 name=g\n", NULL},
    {"soft_max mask rows", HEAD "leaf 2 f32 64 3 1 1 none name=mask\nnode 3 f32 64 8 1 1 soft_max src=0,2 name=p\n",
     "the mask is [ne0 = 64, >= 8 rows]"},
    {"soft_max mask type", HEAD "leaf 2 i32 64 8 1 1 none name=mask\nnode 3 f32 64 8 1 1 soft_max src=0,2 name=p\n",
     "the mask (source 1) is f32 or f16"},
    {"soft_max sinks", HEAD "leaf 2 f16 1 1 1 1 none name=s\nnode 3 f32 64 8 1 1 soft_max src=0,-,2 name=p\n",
     "sinks (source 2) are f32"},
    {"rope positions", HEAD "leaf 2 i32 3 1 1 1 none name=pos\nnode 3 f32 64 8 1 1 rope src=0,2 params=0,64 name=r\n",
     "one position per token"},
    {"rope mode", HEAD "leaf 2 i32 1 1 1 1 none name=pos\nnode 3 f32 64 8 1 1 rope src=0,2 params=0,64,1 name=r\n",
     "mode 1: bit 0 is no longer a rope mode"},
    {"rope mrope positions", HEAD "leaf 2 i32 1 1 1 1 none name=pos\nnode 3 f32 64 8 1 1 rope src=0,2 params=0,64,8 name=r\n",
     "multimodal mode 8: four positions per token"},
    {"rope mrope ok", HEAD "leaf 2 i32 4 1 1 1 none name=pos\nnode 3 f32 64 8 1 1 rope src=0,2 params=0,64,8,0,0,0,0,0,0,0,0,16,16,0,0 name=r\n",
     NULL},
    {"rope offset", HEAD "leaf 2 i32 1 1 1 1 none name=pos\nnode 3 f32 64 8 1 1 rope src=0,2 params=0,32,0,0,0,0,0,0,0,0,0,0,0,0,0,-2 name=r\n",
     "offset -2 (op param 15): not below 0"},
    {"rope vision offset", HEAD "leaf 2 i32 4 1 1 1 none name=pos\nnode 3 f32 64 8 1 1 rope src=0,2 params=0,32,24,0,0,0,0,0,0,0,0,16,16,0,0,2 name=r\n",
     "0 for vision"},
    {"rope position type", HEAD "leaf 2 f32 1 1 1 1 none name=pos\nnode 3 f32 64 8 1 1 rope src=0,2 params=0,64 name=r\n",
     "positions (source 1) are an i32 vector"},
    {"get_rows index type", HEAD "leaf 2 i64 3 1 1 1 none name=i\nnode 3 f32 64 3 1 1 get_rows src=0,2 name=r\n",
     "row indices (source 1) are i32"},
    {"get_rows result", HEAD "leaf 2 i32 3 1 1 1 none name=i\nnode 3 f32 64 4 1 1 get_rows src=0,2 name=r\n",
     "the result is [64, 3, 1, 1]"},
    {"set_rows ok", HEAD "leaf 2 f16 64 10 1 1 none name=cache\nleaf 3 i32 4 1 1 1 none name=i\n"
                    "node 4 f16 64 10 1 1 set_rows src=1,3,2 view=2:0 name=s\n", NULL},
    {"set_rows one index a row", HEAD "leaf 2 f16 64 10 1 1 none name=cache\nleaf 3 i32 3 1 1 1 none name=i\n"
                                 "node 4 f16 64 10 1 1 set_rows src=1,3,2 view=2:0 name=s\n",
     "one index per row"},
    {"set_rows not a view", HEAD "leaf 2 f16 64 10 1 1 none name=cache\nleaf 3 i32 4 1 1 1 none name=i\n"
                            "node 4 f16 64 10 1 1 set_rows src=1,3,2 name=s\n",
     "the result is a view of the destination (source 2)"},
    {"cpy counts", HEAD "leaf 2 f16 64 3 1 1 none name=d\nnode 3 f16 64 3 1 1 cpy src=0,2 view=2:0 name=c\n",
     "source and destination have the same element count (512 vs 192)"},
    {"cast ok", HEAD "node 2 f16 64 8 1 1 cpy src=0,2 name=c\n", NULL},
    /* fuzz_sched built one: a view at byte 60 copied into a view at byte 56 of the same tensor */
    {"cpy overlapping", HEAD "node 2 f32 24 1 1 1 view src=0 view=0:60 params=60 name=from\n"
                             "node 3 f32 24 1 1 1 view src=0 view=0:56 params=56 name=to\n"
                             "node 4 f32 24 1 1 1 cpy src=2,3 view=0:56 name=c\n",
     "source and destination do not overlap (both in 'a', bytes 60..156 and 56..152)"},
    {"cpy within a tensor, apart", HEAD "node 2 f32 24 1 1 1 view src=0 view=0:0 name=from\n"
                                        "node 3 f32 24 1 1 1 view src=0 view=0:96 params=96 name=to\n"
                                        "node 4 f32 24 1 1 1 cpy src=2,3 view=0:96 name=c\n",
     NULL},
    {"cont type", HEAD "node 2 f16 64 8 1 1 cont src=0 name=c\n", "the result has source 0's type and element count"},
    {"concat dims", HEAD "leaf 2 f32 32 4 1 1 none name=c\nnode 3 f32 64 12 1 1 concat src=0,2 params=1 name=k\n",
     "the sources agree outside dim 1"},
    {"reshape count", HEAD "node 2 f32 64 7 1 1 reshape src=0 view=0:0 name=r\n", "a reshape keeps the element count (512)"},
    {"reshape of a strided view", HEAD "node 2 f32 64 4 1 1 view src=0 view=0:0 nb=4,512,2048,2048 name=v\n"
                                  "node 3 f32 256 1 1 1 reshape src=2 view=0:0 name=r\n",
     "only a contiguous tensor can be reshaped"},
    {"view element stride", HEAD "node 2 f32 32 8 1 1 view src=0 view=0:0 nb=8,256,2048,2048 name=v\n",
     "a view's elements (blocks) are adjacent: nb0 = 4"},
    {"permute axes", HEAD "node 2 f32 64 8 1 1 permute src=0 view=0:0 params=0,0,2,3 name=p\n",
     "the axes (params) are a permutation of 0..3"},
    {"permute strides", HEAD "node 2 f32 8 64 1 1 permute src=0 view=0:0 params=1,0,2,3 name=p\n",
     "dimension 0 of the source goes to dimension 1 with its size and stride"},
    {"view of another tensor", HEAD "node 2 f32 64 4 1 1 reshape src=0 view=1:0 name=r\n",
     "a reshape is a view of its source's memory"},
    {"flash mask type", "tgraph 1\nleaf 0 f32 64 3 4 1 none name=q\nleaf 1 f16 64 16 2 1 none name=k\n"
                        "leaf 2 f16 64 16 2 1 none name=v\nleaf 3 f32 16 3 1 1 none name=m\n"
                        "node 4 f32 64 4 3 1 flash_attn_ext src=0,1,2,3 name=o\n",
     "the mask (source 3) is contiguous f16"},
    {"flash result", "tgraph 1\nleaf 0 f32 64 3 4 1 none name=q\nleaf 1 f16 64 16 2 1 none name=k\n"
                     "leaf 2 f16 64 16 2 1 none name=v\nnode 3 f32 64 3 4 1 flash_attn_ext src=0,1,2 name=o\n",
     "the result is [64, 4, 3, 1]"},
    {"flash heads", "tgraph 1\nleaf 0 f32 64 3 4 1 none name=q\nleaf 1 f16 64 16 3 1 none name=k\n"
                    "leaf 2 f16 64 16 3 1 none name=v\nnode 3 f32 64 4 3 1 flash_attn_ext src=0,1,2 name=o\n",
     "k's rows are q's length and its heads divide q's"},
    {"im2col channels", "tgraph 1\nleaf 0 f16 3 80 16 1 none name=w\nleaf 1 f32 50 40 1 1 none name=x\n"
                        "node 2 f16 240 50 1 1 im2col src=0,1 params=1,0,1,0,1 name=c\n",
     "kernel and input have the same channels"},
    {"im2col ok", "tgraph 1\nleaf 0 f16 3 80 16 1 none name=w\nleaf 1 f32 50 80 1 1 none name=x\n"
                  "node 2 f16 240 50 1 1 im2col src=0,1 params=1,0,1,0,1 name=c\n", NULL},
    {"im2col output", "tgraph 1\nleaf 0 f16 3 80 16 1 none name=w\nleaf 1 f32 50 80 1 1 none name=x\n"
                      "node 2 f16 240 48 1 1 im2col src=0,1 params=1,0,1,0,1 name=c\n",
     "the result is [240, 50, 1, 1]"},
    {"soft_max alibi without a mask", HEAD "node 2 f32 64 8 1 1 soft_max src=0 params=0x3f800000,0x41000000 name=p\n",
     "max_bias (params word 1) above 0 needs a mask (source 1)"},
    {"soft_max alibi with a mask", HEAD "leaf 2 f16 64 8 1 1 none name=mask\n"
                                   "node 3 f32 64 8 1 1 soft_max src=0,2 params=0x3f800000,0x41000000 name=p\n", NULL},
    {"flash alibi without a mask", "tgraph 1\nleaf 0 f32 64 3 4 1 none name=q\nleaf 1 f16 64 16 2 1 none name=k\n"
                                   "leaf 2 f16 64 16 2 1 none name=v\n"
                                   "node 3 f32 64 4 3 1 flash_attn_ext src=0,1,2 params=0x3e000000,0x41000000 name=o\n",
     "max_bias (params word 1) above 0 needs a mask (source 3)"},
    /* ggml_is_contiguous / _rows: a one-element row needs no packed stride */
    {"unary of a transposed column", "tgraph 1\nleaf 0 f32 8 1 1 1 none name=a\n"
                                     "node 1 f32 1 8 1 1 transpose src=0 view=0:0 nb=32,4,32,32 params=1,0,2,3 name=t\n"
                                     "node 2 f32 1 8 1 1 unary src=1 params=10 name=u\n"
                                     "node 3 f32 8 1 1 1 reshape src=1 view=0:0 name=r\n", NULL},
    {"sum_rows result", HEAD "node 2 f32 64 8 1 1 sum_rows src=0 name=s\n", "the result is [1, 8, 1, 1]"},
    /* rules no other case here reached (mutation testing) */
    {"in-place add at another offset", HEAD "node 2 f32 64 4 1 1 view src=0 view=0:0 name=v\n"
                                       "node 3 f32 64 4 1 1 add src=2,2 view=0:1024 name=s\n",
     "the result is a view of source 0 (view=source 0 at its offset)"},
    {"add result shape", HEAD "node 2 f32 64 4 1 1 add src=0,0 name=s\n", "the result has source 0's shape [64, 8, 1, 1]"},
    {"reshape at another offset", HEAD "node 2 f32 64 4 1 1 view src=0 view=0:0 name=v\n"
                                  "node 3 f32 256 1 1 1 reshape src=2 view=0:1024 name=r\n",
     "a reshape starts where its source does (offset 0)"},
    {"add1 of a non-scalar", HEAD "node 2 f32 64 8 1 1 add1 src=0,1 name=s\n", "source 1 is a single element"},
    {"unary one past the sub-ops", HEAD "node 2 f32 64 8 1 1 unary src=0 params=22 name=u\n", "params word 0 is a unary op (0..21)"},
    {"unary last sub-op ok", HEAD "node 2 f32 64 8 1 1 unary src=0 params=21 name=u\n", NULL},
    {"rope frequency factors", HEAD "leaf 2 i32 1 1 1 1 none name=pos\nleaf 3 f32 4 1 1 1 none name=ff\n"
                               "node 4 f32 64 8 1 1 rope src=0,2,3 params=0,64 name=r\n",
     "frequency factors (source 2) are f32, at least n_dims/2 of them"},
    {"mul_mat broadcast dim 3", HEAD "leaf 2 f32 64 8 1 3 none name=w\nleaf 3 f32 64 4 1 2 none name=x\n"
                                "node 4 f32 8 4 1 2 mul_mat src=2,3 name=m\n",
     "source 0's dims 2-3 broadcast over source 1's"},
    {"get_rows index dim 3", HEAD "leaf 2 i32 3 1 1 2 none name=i\nnode 3 f32 64 3 1 1 get_rows src=0,2 name=r\n",
     "indices are [n, ne2, ne3] of source 0"},
    {"set_rows index dim 3", HEAD "leaf 2 f16 64 10 1 1 none name=cache\nleaf 3 i32 4 1 1 2 none name=i\n"
                             "node 4 f16 64 10 1 1 set_rows src=1,3,2 view=2:0 name=s\n",
     "one index per row, broadcast over dims 2-3"},
    {"set_rows of strided rows", HEAD "leaf 2 f32 4 64 1 1 none name=r\n"
                                 "node 3 f32 64 4 1 1 transpose src=2 view=2:0 nb=16,4,1024,1024 params=1,0,2,3 name=t\n"
                                 "leaf 4 f16 64 10 1 1 none name=cache\nleaf 5 i32 4 1 1 1 none name=i\n"
                                 "node 6 f16 64 10 1 1 set_rows src=3,5,4 view=4:0 name=s\n",
     "rows and destination have packed rows"},
    {"concat dim 4", HEAD "node 2 f32 64 8 1 1 concat src=0,0 params=4 name=k\n", "dim (params) is 0..3"},
    {"flash strided mask", "tgraph 1\nleaf 0 f32 64 3 4 1 none name=q\nleaf 1 f16 64 16 2 1 none name=k\n"
                           "leaf 2 f16 64 16 2 1 none name=v\nleaf 3 f16 16 6 1 1 none name=mrows\n"
                           "node 4 f16 16 3 1 1 view src=3 view=3:0 nb=2,64,192,192 name=m\n"
                           "node 5 f32 64 4 3 1 flash_attn_ext src=0,1,2,4 name=o\n",
     "the mask (source 3) is contiguous f16"},
    {"flash ne3", "tgraph 1\nleaf 0 f32 64 3 4 2 none name=q\nleaf 1 f16 64 16 2 1 none name=k\n"
                  "leaf 2 f16 64 16 2 1 none name=v\nnode 3 f32 64 4 3 2 flash_attn_ext src=0,1,2 name=o\n",
     "q, k and v have the same ne3"},
    {"im2col 2d zero stride", "tgraph 1\nleaf 0 f16 3 3 4 8 none name=w\nleaf 1 f32 16 16 4 1 none name=x\n"
                              "node 2 f16 36 14 14 1 im2col src=0,1 params=1,0,0,0,1,1,1 name=c\n",
     "strides and dilations (params) are positive"},
    {"im2col 2d input too short", "tgraph 1\nleaf 0 f16 3 5 4 8 none name=w\nleaf 1 f32 16 3 4 1 none name=x\n"
                                  "node 2 f16 60 14 1 1 im2col src=0,1 params=1,1,0,0,1,1,1 name=c\n",
     "the input is at least the (dilated) kernel's size"},
    {"cpy reads itself as its source", HEAD "node 2 f32 64 8 1 1 cpy src=2,0 view=0:0 name=c\n",
     "source 0 is the node itself (only cpy's destination, slot 1, may be: ggml_cast)"},
    {"in-place dup of another tensor", HEAD "node 2 f32 64 4 1 1 dup src=1 view=0:0 name=d\n",
     "the result is a view of source 0"},
    {"in-place sin of another tensor", HEAD "node 2 f32 64 4 1 1 sin src=1 view=0:0 name=s\n",
     "the result is a view of source 0"},
    /* padding past INT64_MAX: no output, without a signed overflow */
    {"im2col padding past int64", "tgraph 1\nleaf 0 f16 3 1 1 1 none name=w\nleaf 1 i8 9223372036854775807 1 1 1 none name=x\n"
                                  "node 2 f16 3 1 1 1 im2col src=0,1 params=1,0,1,0,1 name=c\n",
     "the input is at least the (dilated) kernel's size"},
    {"an op without rules here", HEAD "node 2 f32 7 7 1 1 conv_2d src=0,1 name=c\n", NULL},
};

static void test_read(void) {
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const struct rule_case *c = &cases[i];
        struct tg_file *f = NULL;
        enum tg_status st = tg_file_parse(c->text, strlen(c->text), "in.tg", &f);
        if (!c->want) {
            CHECK_MSG(st == TG_OK, "%s: refused: %s", c->what, tg_last_error());
        } else {
            CHECK_MSG(st == TG_ERR_INVALID && strstr(tg_last_error(), c->want) && strstr(tg_last_error(), "in.tg:") &&
                          strstr(tg_last_error(), "breaks a rule of its op"),
                      "%s: got '%s', wanted '%s'", c->what, st == TG_OK ? "accepted" : tg_last_error(), c->want);
        }
        tg_file_free(f);
    }
}

/* The API: constructors refuse with a status and the rule; tg_op_validate
 * judges tensors made raw. */
static void test_api(void) {
    struct tg_context *ctx = tg_context_new((struct tg_context_params){.no_alloc = true});
    struct tg_tensor *a = tg_new_tensor_2d(ctx, TG_TYPE_F32, 64, 8), *b = tg_new_tensor_2d(ctx, TG_TYPE_F32, 32, 4);
    tg_set_name(a, "a");
    CHECK(tg_mul_mat(ctx, a, b) == NULL);
    CHECK_ERR_HAS("inner dimensions");
    CHECK_ERR_HAS("mul_mat of 'a' f32 [64, 8, 1, 1] and '' f32 [32, 4, 1, 1]"); /* both shapes, an unnamed b too */
    /* every rule about two operands names both, with their shapes */
    struct tg_tensor *m = tg_new_tensor_3d(ctx, TG_TYPE_F32, 64, 3, 2), *h = tg_new_tensor_2d(ctx, TG_TYPE_I32, 64, 8);
    struct tg_tensor *g3 = tg_new_tensor_3d(ctx, TG_TYPE_F32, 64, 4, 3);
    tg_set_name(b, "b");
    tg_set_name(m, "m");
    tg_set_name(h, "h");
    tg_set_name(g3, "g3");
    CHECK(tg_add(ctx, a, m) == NULL);
    CHECK_ERR_HAS("add of 'a' f32 [64, 8, 1, 1] and 'm' f32 [64, 3, 2, 1]: second operand's shape");
    CHECK(tg_add1(ctx, a, b) == NULL);
    CHECK_ERR_HAS("add1 of 'a' f32 [64, 8, 1, 1] and 'b' f32 [32, 4, 1, 1]: second operand must have exactly one");
    CHECK(tg_soft_max(ctx, a, h, 1.0f, 0.0f) == NULL);
    CHECK_ERR_HAS("soft_max of 'a' f32 [64, 8, 1, 1] and 'h' i32 [64, 8, 1, 1]: mask must be f32 or f16");
    CHECK(tg_soft_max(ctx, a, b, 1.0f, 0.0f) == NULL);
    CHECK_ERR_HAS("soft_max of 'a' f32 [64, 8, 1, 1] and 'b' f32 [32, 4, 1, 1]: mask shape");
    CHECK(tg_mul_mat(ctx, g3, m) == NULL);
    CHECK_ERR_HAS("mul_mat of 'g3' f32 [64, 4, 3, 1] and 'm' f32 [64, 3, 2, 1]: dims 2-3 of b");
    CHECK(tg_cpy(ctx, a, b) == NULL);
    CHECK_ERR_HAS("cpy of 'a' f32 [64, 8, 1, 1] and 'b' f32 [32, 4, 1, 1]: source and destination element counts");
    CHECK(tg_concat(ctx, a, h, 1) == NULL);
    CHECK_ERR_HAS("concat of 'a' f32 [64, 8, 1, 1] and 'h' i32 [64, 8, 1, 1]: operands must have the same type");
    CHECK(tg_concat(ctx, a, b, 1) == NULL);
    CHECK_ERR_HAS("concat of 'a' f32 [64, 8, 1, 1] and 'b' f32 [32, 4, 1, 1]: shapes differ outside the concat dim");
    struct tg_tensor *t = tg_transpose(ctx, a);
    CHECK(t && tg_unary(ctx, t, TG_UNARY_SILU) == NULL);
    CHECK_ERR_HAS("unary 'unary-");
    CHECK_ERR_HAS("source 0's rows are packed");
    CHECK(tg_soft_max(ctx, t, NULL, 1.0f, 0.0f) == NULL);
    CHECK_ERR_HAS("source 0 is contiguous");
    struct tg_tensor *idx = tg_new_tensor_1d(ctx, TG_TYPE_I64, 3);
    CHECK(tg_get_rows(ctx, a, idx) == NULL);
    CHECK_ERR_HAS("row indices (source 1) are i32");
    CHECK(tg_soft_max(ctx, a, NULL, 1.0f, 8.0f) == NULL);
    CHECK_ERR_HAS("max_bias (params word 1) above 0 needs a mask");
    /* set_rows takes f16 rows as ggml does */
    struct tg_tensor *cache = tg_new_tensor_2d(ctx, TG_TYPE_F16, 64, 10);
    struct tg_tensor *rows = tg_new_tensor_2d(ctx, TG_TYPE_F16, 64, 3);
    CHECK_MSG(tg_set_rows(ctx, cache, rows, idx) != NULL, "set_rows of f16 rows: %s", tg_last_error());
    /* a padding near INT_MAX: the output size without signed overflow (ggml's int 2 * p wraps) */
    struct tg_tensor *kernel = tg_new_tensor_4d(ctx, TG_TYPE_F16, 3, 3, 4, 8);
    struct tg_tensor *image = tg_new_tensor_4d(ctx, TG_TYPE_F32, 16, 16, 4, 1);
    struct tg_tensor *cols = tg_im2col(ctx, kernel, image, 1, 1, INT32_MAX, 0, 1, 1, true, TG_TYPE_F16);
    CHECK_MSG(cols && cols->ne[1] == 16 + 2 * (int64_t)INT32_MAX - 2 && cols->ne[2] == 14,
              "im2col with padding INT32_MAX: %s", cols ? "wrong shape" : tg_last_error());
    struct tg_tensor *ok = tg_mul_mat(ctx, a, tg_new_tensor_2d(ctx, TG_TYPE_F32, 64, 3));
    CHECK(ok && tg_op_validate(ok) == TG_OK);
    int64_t ne[4] = {8, 3, 1, 1};
    size_t nb[4] = {0, 0, 0, 0};
    struct tg_tensor *raw = tg_new_tensor_raw(ctx, TG_TYPE_F32, ne, nb);
    raw->op = TG_OP_MUL_MAT;
    raw->src[0] = a;
    raw->src[1] = ok->src[1];
    tg_set_name(raw, "raw");
    CHECK_STATUS(tg_op_validate(raw), TG_ERR_INVALID);
    CHECK_ERR_HAS("mul_mat 'raw' breaks a rule of its op: a result that is not a view is contiguous");
    raw->src[1] = raw;
    CHECK_STATUS(tg_op_validate(raw), TG_ERR_INVALID);
    CHECK_ERR_HAS("source 1 is the node itself");
    tg_context_free(ctx);
}

/* The corpus graphs, exported by ggml, hold every rule. */
static void test_corpus(void) {
    const char *graphs[] = {"llama-tiny-prefill32", "tinyllama-1.1b-decode", "tinyllama-1.1b-prefill512",
                            "llama-7b-decode-flash", "llama-7b-prefill512-flash", "llama-7b-decode",
                            "llama-7b-prefill512", "whisper-base-encoder"};
    for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
        char path[128];
        snprintf(path, sizeof path, "corpus/graphs/%s.tg", graphs[i]);
        struct tg_file *f = NULL;
        CHECK_OK(tg_file_load(path, &f));
        tg_file_free(f);
    }
}

int main(void) {
    test_read();
    test_api();
    test_corpus();
    return tg_test_finish();
}
