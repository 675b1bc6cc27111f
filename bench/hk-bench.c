/* hk-bench: throughput of every kernel of the table (src/cases/cases.h) over model shapes, measured
 * cold (tools/measure.h), beside llama.cpp's Vulkan backend on the H200 where the project has its
 * number. Each row: kernel, shape, ms per op in a long stream, ms of one op alone, GB/s on the
 * real bytes moved (quantized weights as stored, activations, outputs), its ratio to the copy
 * bandwidth measured right after it, TFLOP/s of useful operations for compute-bound kernels, and
 * llama.cpp-vk's time for the same op where known. Parity is hk-check's job: nothing is compared.
 */
#include "measure.h"
#include "step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static FILE *json;
static int json_rows;

static void usage(FILE *f)
{
    fprintf(f, "usage: hk-bench [options] [--json FILE]\n"
               "       hk-bench --step [SHAPE[:LAYERS],...] [options]\n"
               "Times every kernel over model shapes on one device; --step times a model's whole decode step\n"
               "instead, on synthetic weights in the Q4_K_M layout (KV cache of 4096, token at position 512).\n");
    bench_options_help(f);
    fprintf(f, "  --json FILE      also write the rows as JSON\n"
               "  --step [LIST]    shapes llama3-8b, qwen3-30b-a3b, tiny-llama, tiny-moe, each with an optional\n"
               "                   layer count (default: llama3-8b:8,llama3-8b:32,qwen3-30b-a3b:8,\n"
               "                   qwen3-30b-a3b:48; on CPU devices tiny-llama,tiny-moe)\n");
}

static void bench_row(bench *b, hk_case_run *run, hk_case_bound *bound)
{
    timing t = time_case(b, run, bound);
    double gbs = run->bytes / (t.stream_ms * 1e-3) / 1e9, copy = copy_gbs(b);
    double tflops = run->flops ? run->flops / (t.stream_ms * 1e-3) / 1e12 : 0;
    double ref = run->shape.llama_ms;
    char vs[32] = "";
    if (ref > 0)
        snprintf(vs, sizeof vs, "%8.4f %5.1fx", ref, ref / t.stream_ms);
    char tf[16] = "-";
    if (run->flops)
        snprintf(tf, sizeof tf, "%.1f", tflops);
    char sched[160];
    printf("%-17s %-36s %10.4f %10.4f %9.1f %6.1f%% %8s %8.0f  %s%s%s\n", run->kcase->name, run->label, t.stream_ms,
           t.single_ms, gbs, 100.0 * gbs / copy, tf, copy, vs, vs[0] ? "  " : "", row_schedule(b, run, sched, sizeof sched));
    if (b->csv)
        fprintf(b->csv, "%s,%s,%s,%.6f,%.6f,%.2f,%.4f,%.2f,%.1f,%.4f\n", b->caps.device_name, run->kcase->name,
                run->label, t.stream_ms, t.single_ms, gbs, gbs / copy, tflops, copy, ref);
    if (json)
        fprintf(json,
                "%s\n  {\"device\": \"%s\", \"kernel\": \"%s\", \"shape\": \"%s\", \"ms\": %.6f, \"ms_single\": %.6f, "
                "\"gbs\": %.2f, \"ratio_to_copy\": %.4f, \"tflops\": %.2f, \"copy_gbs\": %.1f, \"llama_vk_ms\": %.4f}",
                json_rows++ ? "," : "", b->caps.device_name, run->kcase->name, run->label, t.stream_ms, t.single_ms,
                gbs, gbs / copy, tflops, copy, ref);
}

int main(int argc, char **argv)
{
    bench_options o;
    const char *json_path = NULL;
    /* --step and its optional list come out of argv before the common options are read */
    int step = 0;
    const char *step_list = NULL;
    int kept = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--step")) {
            step = 1;
            if (i + 1 < argc && argv[i + 1][0] != '-')
                step_list = argv[++i];
        } else
            argv[kept++] = argv[i];
    }
    argc = kept;
    int rc = bench_parse(&o, argc, argv, "hk-bench", usage, &json_path);
    if (rc >= 0)
        return rc;
    bench b = {0};
    if (step) {
        bench_open(&b, "hk-bench", &o, "device,kernel,shape,ms,dispatches,barriers,weight_bytes,copy_gbs,llama_vk_ms");
        rc = bench_step(&b, step_list);
        bench_close(&b);
        return rc;
    }
    bench_open(&b, "hk-bench", &o, "device,kernel,shape,ms,ms_single,gbs,ratio_to_copy,tflops,copy_gbs,llama_vk_ms");
    if (json_path)
        json = bench_create("hk-bench", json_path);
    if (json)
        fprintf(json, "[");
    printf("%-17s %-36s %10s %10s %9s %7s %8s %8s  %s\n", "kernel", "shape", "ms/op", "ms single", "GB/s", "of copy",
           "TFLOP/s", "copy", "llama-vk ms, speedup");
    for_each_case(&b, HK_REF_NONE, bench_row);
    if (json) {
        fprintf(json, "\n]\n");
        fclose(json);
    }
    int failures = b.failures; /* --shapes that matched nothing */
    bench_close(&b);
    return failures ? 1 : 0;
}
