/* Every argument check: the right status, a message that names the problem, and nothing written
 * (the output stays poisoned). Run under ASan, it also shows that failing calls leak nothing. */
#include "hk_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hk_context *ctx;
static hk_buffer *w, *x, *y, *small;
static const uint32_t rows = 4, k = 256;

#define Y_FLOATS 64

static void poison_y(void)
{
    float p[Y_FLOATS];
    hk_poison(p, Y_FLOATS);
    hk_buffer_upload(y, 0, p, sizeof p);
}

static void check_y_untouched(const char *name)
{
    uint32_t words[Y_FLOATS];
    hk_buffer_download(y, 0, words, sizeof words);
    uint32_t bad = 0;
    for (int i = 0; i < Y_FLOATS; i++)
        bad += words[i] != HK_POISON_WORD;
    char label[160];
    snprintf(label, sizeof label, "%s wrote nothing", name);
    hk_check(bad == 0, label, "%u words changed", bad);
}

/* one failing call: its status, its message, and no write */
#define EXPECT(name, call, status, needle)                                                                             \
    do {                                                                                                               \
        poison_y();                                                                                                    \
        hk_check_status(name, (call), status, needle);                                                                 \
        check_y_untouched(name);                                                                                       \
    } while (0)

int main(void)
{
    ctx = hk_test_context();
    hk_rng rng = {5};
    uint8_t wdata[4 * 144];
    hk_random_blocks(&rng, HK_TYPE_Q4_K, wdata, 4, 0.1f);
    float xdata[256];
    hk_rng_fill(&rng, xdata, 256, -1, 1);
    w = hk_test_buffer(ctx, sizeof wdata, wdata);
    x = hk_test_buffer(ctx, sizeof xdata, xdata);
    y = hk_test_buffer(ctx, Y_FLOATS * 4, NULL);
    small = hk_test_buffer(ctx, 8, NULL);
    hk_view wv = {w, 0}, xv = {x, 0}, yv = {y, 0};

    /* the valid call works, so every failure below is down to its one bad argument */
    poison_y();
    hk_check_status("valid matvec", hk_matvec_q4k(ctx, NULL, wv, xv, yv, rows, k), HK_OK, NULL);

    EXPECT("null context", hk_matvec_q4k(NULL, NULL, wv, xv, yv, rows, k), HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    EXPECT("null buffer", hk_matvec_q4k(ctx, NULL, (hk_view){NULL, 0}, xv, yv, rows, k), HK_ERROR_INVALID_ARGUMENT,
           "w.buffer is NULL");
    EXPECT("k off the block", hk_matvec_q4k(ctx, NULL, wv, xv, yv, rows, 1000), HK_ERROR_INVALID_ARGUMENT,
           "k=1000 is not a positive multiple of 256 (q4_k block)");
    EXPECT("k zero", hk_matvec_q8_0(ctx, NULL, wv, xv, yv, rows, 0), HK_ERROR_INVALID_ARGUMENT, "k=0");
    EXPECT("rows zero", hk_matvec_q6k(ctx, NULL, wv, xv, yv, 0, k), HK_ERROR_INVALID_ARGUMENT, "rows is 0");
    EXPECT("unsupported type", hk_matvec(ctx, NULL, HK_TYPE_Q8_1, wv, xv, yv, rows, k), HK_ERROR_UNSUPPORTED,
           "not a matvec weight type");
    EXPECT("unknown type", hk_matvec(ctx, NULL, (hk_type)99, wv, xv, yv, rows, k), HK_ERROR_UNSUPPORTED, "wtype=?");
    EXPECT("weights past the end", hk_matvec_q4k(ctx, NULL, wv, xv, yv, rows + 1, k), HK_ERROR_INVALID_ARGUMENT,
           "w needs 720 bytes at offset 0, past the end of its 576-byte buffer");
    EXPECT("view offset past the end", hk_matvec_q4k(ctx, NULL, wv, (hk_view){x, 2048}, yv, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "x needs 1024 bytes at offset 2048");
    EXPECT("huge offset", hk_matvec_q4k(ctx, NULL, wv, xv, (hk_view){y, UINT64_MAX - 3}, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "past the end");
    EXPECT("misaligned weights", hk_matvec_q4k(ctx, NULL, (hk_view){w, 1}, xv, yv, rows, k), HK_ERROR_INVALID_ARGUMENT,
           "w.offset=1 is not a multiple of 2");
    EXPECT("misaligned x", hk_matvec_q4k(ctx, NULL, wv, (hk_view){x, 2}, yv, rows, k), HK_ERROR_INVALID_ARGUMENT,
           "x.offset=2 is not a multiple of 4");
    EXPECT("output too small", hk_matvec_q4k(ctx, NULL, wv, xv, (hk_view){small, 0}, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "y needs 16 bytes");
    EXPECT("output overlaps input", hk_matvec_q4k(ctx, NULL, wv, xv, (hk_view){x, 0}, rows, k),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps x");
    EXPECT("gemv zero k", hk_gemv_f32(ctx, NULL, xv, xv, yv, 1, 0), HK_ERROR_INVALID_ARGUMENT, "must both be positive");
    EXPECT("gemv past the end", hk_gemv_f32(ctx, NULL, xv, xv, yv, 2, 256), HK_ERROR_INVALID_ARGUMENT, "w needs 2048");
    EXPECT("rmsnorm eps", hk_rmsnorm(ctx, NULL, xv, xv, yv, 1, 16, 0.0f), HK_ERROR_INVALID_ARGUMENT, "eps=0");
    EXPECT("rmsnorm eps nan", hk_rmsnorm(ctx, NULL, xv, xv, yv, 1, 16, 0.0f / 0.0f), HK_ERROR_INVALID_ARGUMENT, "eps=");
    EXPECT("rmsnorm partial alias", hk_rmsnorm(ctx, NULL, (hk_view){y, 4}, xv, yv, 1, 16, 1e-5f),
           HK_ERROR_INVALID_ARGUMENT, "output y overlaps x");
    EXPECT("quantize k", hk_quantize_q8_1(ctx, NULL, xv, yv, 48), HK_ERROR_INVALID_ARGUMENT,
           "k=48 is not a positive multiple of 32");
    EXPECT("quantize output", hk_quantize_q8_1(ctx, NULL, xv, (hk_view){small, 0}, 32), HK_ERROR_INVALID_ARGUMENT,
           "y needs 36 bytes");

    /* MoE gather and router */
    hk_moe_shape shape = {4, 1, 256, 2, 0};
    hk_buffer *aligned = hk_test_buffer(ctx, 4096, NULL);
    hk_view ids = {aligned, 2048}, x16 = {aligned, 1024};
    EXPECT("moe null shape", hk_moe_matvec(ctx, NULL, HK_TYPE_Q4_K, wv, x16, ids, yv, NULL), HK_ERROR_INVALID_ARGUMENT,
           "shape is NULL");
    hk_moe_shape zero = {4, 1, 256, 0, 0};
    EXPECT("moe zero slots", hk_moe_matvec(ctx, NULL, HK_TYPE_Q4_K, wv, x16, ids, yv, &zero), HK_ERROR_INVALID_ARGUMENT,
           "slots=0");
    EXPECT("moe experts past the end", hk_moe_matvec(ctx, NULL, HK_TYPE_Q4_K, wv, x16, ids, yv, &(hk_moe_shape){5, 1, 256, 2, 0}),
           HK_ERROR_INVALID_ARGUMENT, "w needs 720 bytes");
    EXPECT("moe x misaligned", hk_moe_matvec(ctx, NULL, HK_TYPE_Q4_K, wv, (hk_view){aligned, 1028}, ids, yv, &shape),
           HK_ERROR_INVALID_ARGUMENT, "x.offset=1028 is not a multiple of 16");
    EXPECT("moe ids past the end", hk_moe_matvec(ctx, NULL, HK_TYPE_Q4_K, wv, x16, (hk_view){aligned, 4092}, yv, &shape),
           HK_ERROR_INVALID_ARGUMENT, "ids needs 8 bytes at offset 4092");
    EXPECT("moe_int8 bad type", hk_moe_matvec_int8(ctx, NULL, HK_TYPE_F32, wv, x16, ids, yv, &shape), HK_ERROR_UNSUPPORTED,
           "not a matvec weight type");
    EXPECT("route top_k 0", hk_moe_route(ctx, NULL, xv, ids, yv, 1, 8, 0, 0), HK_ERROR_INVALID_ARGUMENT, "top_k=0");
    EXPECT("route top_k > experts", hk_moe_route(ctx, NULL, xv, ids, yv, 1, 8, 9, 0), HK_ERROR_INVALID_ARGUMENT,
           "top_k=9 must be in 1..min(n_experts=8, 64)");
    {
        hk_caps caps;
        hk_context_caps(ctx, &caps);
        uint32_t too_many = 64 * (caps.subgroup_size_control ? caps.subgroup_size : caps.subgroup_size_min) + 1;
        hk_buffer *big = hk_test_buffer(ctx, (uint64_t)too_many * 4 + 64, NULL);
        EXPECT("route too many experts", hk_moe_route(ctx, NULL, (hk_view){big, 0}, ids, yv, 1, too_many, 8, 0),
               HK_ERROR_UNSUPPORTED, "more than this device's router takes");
        hk_buffer_destroy(big);
    }
    EXPECT("route logits past the end", hk_moe_route(ctx, NULL, xv, ids, yv, 3, 128, 8, 0), HK_ERROR_INVALID_ARGUMENT,
           "logits needs 1536 bytes");
    EXPECT("int8 matvec q4_k misaligned", hk_matvec_int8(ctx, NULL, HK_TYPE_Q4_K, (hk_view){w, 2}, xv, yv, 1, 256),
           HK_ERROR_INVALID_ARGUMENT, "w.offset=2 is not a multiple of 16");
    hk_buffer_destroy(aligned);

    /* objects from another context */
    hk_context_desc desc;
    hk_context_desc_init(&desc);
    desc.disable_pipeline_cache = 1;
    hk_context *other = NULL;
    if (hk_context_create(&desc, &other) == HK_OK) {
        hk_buffer *foreign = hk_test_buffer(other, 1024, NULL);
        hk_stream *foreign_stream = NULL;
        hk_stream_create(other, 0, &foreign_stream);
        EXPECT("foreign buffer", hk_matvec_q4k(ctx, NULL, wv, (hk_view){foreign, 0}, yv, rows, k),
               HK_ERROR_INVALID_ARGUMENT, "x.buffer belongs to another context");
        EXPECT("foreign stream", hk_matvec_q4k(ctx, foreign_stream, wv, xv, yv, rows, k), HK_ERROR_INVALID_ARGUMENT,
               "stream belongs to another context");
        hk_stream_destroy(foreign_stream);
        hk_buffer_destroy(foreign);
        hk_context_destroy(other);
    } else {
        hk_check(0, "second context", "%s", hk_last_error());
    }

    /* a failed call leaves a stream usable and records nothing */
    hk_stream *s = NULL;
    hk_check_status("stream create", hk_stream_create(ctx, 0, &s), HK_OK, NULL);
    EXPECT("failed call on stream", hk_matvec_q4k(ctx, s, wv, xv, yv, rows, 1000), HK_ERROR_INVALID_ARGUMENT, "k=1000");
    hk_check(hk_stream_kernel_count(s) == 0, "failed call records nothing", "%u recorded", hk_stream_kernel_count(s));
    double ms;
    hk_check_status("timestamp on untimed stream", hk_stream_timestamp(s, NULL), HK_ERROR_STATE, "without timestamps");
    hk_check_status("elapsed before any submit", hk_stream_elapsed_ms(s, 0, 1, &ms), HK_ERROR_INVALID_ARGUMENT,
                    "timestamps 0..1: the last submit recorded 0");
    hk_check_status("empty submit", hk_stream_submit(s), HK_OK, NULL);
    hk_stream_destroy(s);
    hk_check_status("stream null out", hk_stream_create(ctx, 0, NULL), HK_ERROR_INVALID_ARGUMENT, "out_stream is NULL");
    hk_check_status("submit null", hk_stream_submit(NULL), HK_ERROR_INVALID_ARGUMENT, "stream is NULL");

    /* buffers */
    hk_buffer *b = NULL;
    hk_check_status("buffer size 0", hk_buffer_create(ctx, 0, &b), HK_ERROR_INVALID_ARGUMENT, "size is 0");
    hk_check(b == NULL, "failed create leaves NULL", NULL);
    hk_check_status("buffer null context", hk_buffer_create(NULL, 16, &b), HK_ERROR_INVALID_ARGUMENT, "context is NULL");
    hk_check_status("upload past end", hk_buffer_upload(small, 4, xdata, 8), HK_ERROR_INVALID_ARGUMENT,
                    "range [4, +8) is past the end of the 8-byte buffer");
    hk_check_status("download null", hk_buffer_download(small, 0, NULL, 8), HK_ERROR_INVALID_ARGUMENT, "data is NULL");
    hk_check_status("fill misaligned", hk_buffer_fill(small, 2, 4, 0), HK_ERROR_INVALID_ARGUMENT, "multiples of 4");
    hk_check_status("wrap null", hk_buffer_wrap(ctx, VK_NULL_HANDLE, 16, &b), HK_ERROR_INVALID_ARGUMENT, "buffer is NULL");
    hk_check_status("copy past end", hk_copy(ctx, NULL, (hk_view){x, 0}, (hk_view){small, 0}, 16),
                    HK_ERROR_INVALID_ARGUMENT, "dst needs 16 bytes");
    hk_check_status("caps null", hk_context_caps(ctx, NULL), HK_ERROR_INVALID_ARGUMENT, "out_caps is NULL");
    hk_check_status("context null out", hk_context_create(NULL, NULL), HK_ERROR_INVALID_ARGUMENT, "out_context");
    hk_borrowed_device borrowed = {0};
    hk_context *bc = NULL;
    hk_check_status("borrow nothing", hk_context_create_borrowed(&borrowed, &bc), HK_ERROR_INVALID_ARGUMENT,
                    "must all be set");
    hk_context_desc bad;
    hk_context_desc_init(&bad);
    bad.device_name = "no such device anywhere";
    hk_check_status("device name matches nothing", hk_context_create(&bad, &bc), HK_ERROR_NOT_FOUND,
                    "matches \"no such device anywhere\"");
    hk_context_desc_init(&bad);
    bad.device_index = 999;
    hk_check_status("device index out of range", hk_context_create(&bad, &bc), HK_ERROR_NOT_FOUND, "device index 999");

    /* destroy functions accept NULL */
    hk_buffer_destroy(NULL);
    hk_stream_destroy(NULL);
    hk_context_destroy(NULL);
    hk_check(strcmp(hk_status_name(HK_ERROR_UNSUPPORTED), "HK_ERROR_UNSUPPORTED") == 0 &&
                 strcmp(hk_type_name(HK_TYPE_Q6_K), "q6_k") == 0 && hk_type_block_bytes(HK_TYPE_Q4_K) == 144 &&
                 hk_type_block_values((hk_type)42) == 0,
             "names and sizes", NULL);

    hk_buffer_destroy(w);
    hk_buffer_destroy(x);
    hk_buffer_destroy(y);
    hk_buffer_destroy(small);
    return hk_test_finish(ctx);
}
