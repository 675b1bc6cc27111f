/* hk-check: parity and bandwidth of every kernel of the table (tools/cases.h) on one device.
 *
 * For each kernel and shape: run it once into poisoned outputs and compare with the C reference
 * at the gate the tests use, then time it cold — weights rotated over enough copies that their
 * footprint is well past the GPU's last-level cache, many dispatches recorded in one stream, GPU
 * timestamps — and report GB/s on the real bytes moved (and TFLOP/s for compute-bound kernels)
 * beside the device's own copy bandwidth measured right after the row. Exits 1 if any row fails
 * its gate, 2 on a usage or setup error.
 */
#include "gguf_check.h"
#include "measure.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: hk-check [options]\n"
               "Runs every kernel once against its C reference and times it on one device.\n"
               "       hk-check --gguf MODEL.gguf [options]\n"
               "Checks and times every tensor of your GGUF model (hk-check --gguf X --help: its options).\n");
    bench_options_help(f);
}

static void check_row(bench *b, hk_case_run *run, hk_case_bound *bound)
{
    char detail[320];
    /* the last copy: the replication is checked too */
    double err = hk_case_check(run, bound, bound->copies - 1, detail, sizeof detail);
    timing t = time_case(b, run, bound);
    double gate = hk_case_gate(run);
    int ok = err < gate;
    b->failures += !ok;
    double gbs = run->bytes / (t.stream_ms * 1e-3) / 1e9, copy = copy_gbs(b);
    double tflops = run->flops ? run->flops / (t.stream_ms * 1e-3) / 1e12 : 0;
    char tf[16] = "-";
    if (run->flops)
        snprintf(tf, sizeof tf, "%.1f", tflops);
    printf("%-17s %-36s %9.2e %7.0e %-4s %10.4f %10.4f %9.1f %6.1f%% %8s %8.0f\n", run->kcase->name, run->label, err,
           gate, ok ? "ok" : "FAIL", t.stream_ms, t.single_ms, gbs, 100.0 * gbs / copy, tf, copy);
    if (!ok)
        printf("    %s\n", detail);
    if (b->csv)
        fprintf(b->csv, "%s,%s,%s,%.3e,%.0e,%d,%.6f,%.6f,%.2f,%.4f,%.2f,%.1f\n", b->caps.device_name, run->kcase->name,
                run->label, err, gate, ok, t.stream_ms, t.single_ms, gbs, gbs / copy, tflops, copy);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--gguf"))
            return gguf_check_main(argc, argv);
    bench_options o;
    int rc = bench_parse(&o, argc, argv, "hk-check", usage, NULL);
    if (rc >= 0)
        return rc;
    bench b = {0};
    bench_open(&b, "hk-check", &o,
               "device,kernel,shape,scale_rel,gate,ok,ms_stream,ms_single,gbs,ratio_to_copy,tflops,copy_gbs");
    printf("%-17s %-36s %9s %7s %-4s %10s %10s %9s %7s %8s %8s\n", "kernel", "shape", "error", "gate", "ok", "ms/op",
           "ms single", "GB/s", "of copy", "TFLOP/s", "copy");
    for_each_case(&b, b.quick ? HK_REF_ALL : HK_REF_SAMPLE, check_row);
    printf("\n%s: %d row(s) failed their gate\n", b.failures ? "FAIL" : "OK", b.failures);
    int failures = b.failures;
    bench_close(&b);
    return failures ? 1 : 0;
}
