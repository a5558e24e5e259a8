/*
 * step05: the fused CUDA kernels (book Step 7's "production CUDA version", built up), each checked against the
 * float64 reference and timed against naive attention on the same GPU.
 *
 * What it adds over step 04: the tiled forward of step 04 runs on the GPU as ONE kernel (scores, softmax and P V
 * fused; S and P never exist in device memory), then climbs a ladder of kernels, one idea a rung: kernel 1
 * transcribes step 04's loop (one thread per query row), kernel 2 shares K/V tiles through shared memory, the
 * next ones use the tensor cores, then Hopper's wgmma and TMA, warp specialization, persistent blocks. Beside
 * the forward: the backward (dQ, dK, dV from the forward's L), decode against a KV cache, and the forward in FP8.
 *
 * Run:   make step05 && ./step05              (kernel 1 in fp32 and the fastest tensor-core kernel in fp16, each
 *                                              checked, then timed against naive attention)
 *        ./step05 --dtype fp16                (every tensor-core kernel: checked, then timed)
 *        ./step05 --check                     (the self-test grid of the four families; no GPU: FP8's CPU half)
 *        ./step05 --bench --dtype fp16        (FlashAttention's benchmark shapes, TFLOP/s)
 *        ./step05 --backward --dtype fp16     (the backward kernels vs the naive cuBLAS backward)
 *        ./step05 --decode                    (the decode kernels, GB/s of cache read)
 *        ./step05 --dtype fp8 --errors        (what e4m3 costs in accuracy, on the CPU: no GPU needed)
 *        make idea K=N                        (the one idea kernel N adds to the rung it extends)
 * Expect (last lines of ./step05):
 *        answer (fp32): kernel 1, the chapter's loop, takes ... ms vs naive's ... ms: ...x. ...
 *        answer (fp16): the fastest tensor-core kernel here (kernel N, name) takes ... ms vs naive fp16's ... ms: ...x. ...
 *        and of ./step05 --check: "step05: X passed, 0 failed, Y skipped".
 * Limits: needs an NVIDIA GPU (sm_75 or newer; which kernels each GPU runs: the root README, "Which GPU runs
 *        what") and nvcc at build time, else it says so and exits 77 (--check and --dtype fp8 --errors still run
 *        their CPU half). The forward: fp32 D in 8..128 (multiples of 8; kernel 2: of 16), fp16/bf16 D = 64 or
 *        128. The backward: fp32 D in 16..128 (multiples of 16), fp16/bf16 D = 64 or 128. Decode: 1..16 new rows
 *        a sequence, pages of 16..256 keys. FP8: Hopper (sm_90a), D = 64 or 128.
 *
 * The folder, in the order to read it:
 *   forward/     the forward ladder, one kernel a file, from kernel01_transcription.cu on; the early rungs whole
 *                copies, the later ones the hooks they change in the body they share
 *   primitives/  the GPU's instructions wrapped once: mma.sync fragments, wgmma, tensor maps, tile order
 *   kernels.h    the registry: what each kernel file enters (its id, the rung it extends, its idea, its launch);
 *                registry.cu holds the four lists
 *   backward/    the backward ladder (bwdNN_*.cu): dQ, dK, dV, P rebuilt from the forward's L
 *   decode/      the decode ladder (decodeNN_*.cu): new rows against a KV cache, contiguous or paged
 *   fp8/         the forward in FP8: its kernels, and fp8.c the CPU numerics they transcribe (e4m3, the
 *                quantizers, the loop)
 *   host/        the drivers: runner.c what the four families share (the kernel lists, the problem, the
 *                reference rows, the tables, the CSV); forward.c, backward.c, decode.c, fp8.c each family's
 *                checks, runs and benchmark; alibi.c the score modifier; layout.c the fragment picture
 *   main.c       this file: the options, and which family runs
 */
#include "common.h"
#include "gpu.h"
#include "kernels.h"
#include "host/runner.h"
#include "host/forward.h"
#include "host/backward.h"
#include "host/alibi.h"
#include "host/decode.h"
#include "host/fp8.h"
#include "host/layout.h"

#include <stdlib.h>
#include <string.h>

// --- which family runs ------------------------------------------------------------------

#ifdef HAVE_CUDA
/* --check: the forward's grid (fwd), then the backward's (bwd); the whole grid (no --kernel, no --backward) adds
 * decode's and FP8's. `only` is a forward kernel id, or a backward one when only the backward runs. */
static int run_checks(long only, int fwd, int bwd)
{
    printf("device: %s\n", gpu_describe());
    gpu_refusals_quiet(1); /* a launch this GPU refuses is a SKIP line, with the refusal's words */
    if (fwd) fwd_run_checks(only);
    if (bwd) bwd_run_checks(fwd ? 0 : only);
    if (fwd && bwd && !only) decode_run_checks(0); /* the whole grid: the decode kernels' too (decode.c) */
    if (fwd && bwd && !only) fp8_checks(0);        /* and FP8's: the CPU half and the FP8 kernels (fp8.c) */
    return report_finish();
}
#endif

// --- main ---------------------------------------------------------------------------

static void usage(const Opts *o)
{
    char alibi_ids[64], fp8_ids[64];
    alibi_kernel_ids(alibi_ids, sizeof alibi_ids);
    kernel_ids_phrase(FAM_FP8, 1, ", ", fp8_ids, sizeof fp8_ids);
    printf("usage: ./step05 [options]\n"
           "The fused CUDA kernels, checked and timed against naive cuBLAS attention (book Step 7).\n");
    print_common_usage(o);
    printf("  --bench                FlashAttention's benchmark shapes (batch = 16384/N, heads = 2048/D), TFLOP/s table\n"
           "                         at D = 64 and 128 (--dim 64 or 128: that one only; --seq N: N = 512..N only, as\n"
           "                         --seq 2048 for the short sequences; --decode --bench: its own shapes)\n"
           "  --backward             the backward kernels (dQ, dK, dV) vs the naive cuBLAS backward; with --bench: at\n"
           "                         the benchmark shapes; with --check: only the backward's checks; --kernel N: backward kernel N\n"
           "  --do FILE.npy          with --backward and --q --k --v: dO = dLoss/dO ([B,H,N,D]); --out-dq/--out-dk/--out-dv\n"
           "                         FILE.npy write the gradients of the last backward kernel run (float32)\n"
           "  --alibi                the kernels with a score modifier%s with ALiBi, vs float64 with the bias, timed\n"
           "  --dtype fp8            %s: Q, K, V in e4m3 with per-block scales, vs float64 and kernel %d in fp16;\n"
           "                         with --bench: at the benchmark shapes; --errors: FP8's error table (CPU, no GPU needed);\n"
           "                         --q/--k/--v FILE.npy [--scaling tensor|block|hadamard] [--out O.npy]: that table's\n"
           "                         columns for the reader's tensors, on the CPU (O of --scaling, default block)\n"
           "  --layout-csv FILE      write which lane holds each element of mma.sync's A, B, C (plots/mma_layout.py)\n"
           "  --sanitize-shapes      run each kernel once at N = 65, 257 (for make sanitize; --kernel K[-M]: only those;\n"
           "                         with --backward: only the backward kernels; with --decode: only the decode kernels)\n",
           alibi_ids, fp8_ids, FP8_PEER);
    decode_usage();
}

int main(int argc, char **argv)
{
    Opts o;
    DecodeOpts dec;
    int bench = 0, sanitize = 0, backward = 0, alibi = 0, errors = 0, scaling = -1;
    const char *layout_csv = NULL;
    BwdFiles bf = {NULL, NULL, NULL, NULL};
    opts_expand(&argc, &argv);
    opts_init(&o, "step05", OPT_SHAPE | OPT_DTYPE | OPT_CAUSAL | OPT_KERNEL | OPT_GPU_AS | OPT_SEED | OPT_REPEAT | OPT_CSV | OPT_CHECK |
                  OPT_NPY, (1u << DT_FP32) | (1u << DT_FP16) | (1u << DT_BF16) | (1u << DT_FP8));
    decode_opts_init(&dec);
    for (int i = 1; i < argc; i++) dec.on |= !strcmp(argv[i], "--decode");
    if (dec.on) { o.B = 8; o.H = 32; o.N = 4096; o.D = 128; o.dtype = DT_FP16; } /* --decode's shape: --heads Hq, --seq L */
    else { o.B = 2; o.H = 8; o.N = 4096; o.D = 64; }
    o.repeat = 10;
    for (int i = 1; i < argc; i++) {
        if (opts_parse_common(&o, argc, argv, &i)) continue;
        const int at = i;
        if (decode_parse(&dec, argc, argv, &i)) {
            if (!dec.on) usage_error("option %s goes with --decode (see --help)", argv[at]);
            continue;
        }
        if (!strcmp(argv[i], "--bench")) { bench = 1; continue; }
        if (!strcmp(argv[i], "--sanitize-shapes")) { sanitize = 1; continue; }
        if (!strcmp(argv[i], "--backward")) { backward = 1; continue; }
        if (!strcmp(argv[i], "--alibi")) { alibi = 1; continue; }
        if (!strcmp(argv[i], "--errors")) { errors = 1; continue; }
        if (!strcmp(argv[i], "--layout-csv")) {
            const char *opt = argv[i];
            layout_csv = opt_value(argc, argv, &i);
            if (!*layout_csv) usage_error("option %s: empty file name", opt);
            continue;
        }
        if (!strcmp(argv[i], "--scaling")) { /* Fp8Mode's order */
            static const char *const modes[] = {"tensor", "block", "hadamard"};
            const char *opt = argv[i];
            scaling = parse_choice(opt, opt_value(argc, argv, &i), modes, 3);
            continue;
        }
        const char **file = !strcmp(argv[i], "--do") ? &bf.dout : !strcmp(argv[i], "--out-dq") ? &bf.dq
                          : !strcmp(argv[i], "--out-dk") ? &bf.dk : !strcmp(argv[i], "--out-dv") ? &bf.dv : NULL;
        if (file) {
            if (i + 1 >= argc) usage_error("option %s needs a FILE.npy", argv[i]);
            *file = argv[++i];
            continue;
        }
        usage_error("unknown option '%s' (see --help)", argv[i]);
    }
    if (o.help) { usage(&o); return 0; }
    if (layout_csv) return layout_write(layout_csv); /* the picture's data: the CPU, any machine */
    if (dec.on && (o.qfile || o.kfile || o.vfile)) {     /* decode on the reader's tensors: their own shapes */
        if (bench || o.check || sanitize)
            usage_error("option --q: with --decode the reader's tensors go with the default run (not --bench, --check or "
                        "--sanitize-shapes)");
        decode_files_validate(&o, &dec);
    }
    opts_validate(&o, dtype_size(o.dtype));
    if (bf.dout || bf.dq || bf.dk || bf.dv) {            /* the backward on the reader's tensors */
        if (!backward) usage_error("options --do, --out-dq, --out-dk, --out-dv go with --backward");
        if (bench || sanitize || o.check || alibi || dec.on)
            usage_error("option --do: the reader's tensors go with the default --backward run (not --bench, --check, "
                        "--sanitize-shapes, --alibi or --decode)");
        if (!bf.dout || !o.qfile) usage_error("option --do: the backward on files takes --q, --k, --v and --do, all four");
        long shp[4];
        if (npy_shape("--do", bf.dout, shp) != 4 || shp[0] != o.B || shp[1] != o.H || shp[2] != o.N || shp[3] != o.D)
            usage_error("option --do: %s must have Q's shape [%ld, %ld, %ld, %ld]", bf.dout, o.B, o.H, o.N, o.D);
    } else if (backward && o.qfile) {
        usage_error("option --q: with --backward, give dO too (--do FILE.npy)");
    }
    if (backward && o.outfile) usage_error("option --out saves the forward's O; the backward writes --out-dq, --out-dk, --out-dv");
    if (o.check && o.kernel != o.kernel_last) usage_error("option --kernel: --check takes one kernel, not the range %ld-%ld", o.kernel, o.kernel_last);
    if (dec.on) {
        if (backward || alibi || o.causal)
            usage_error("option --decode runs on its own (causal among the new rows by definition; not with --backward, "
                        "--alibi or --causal)");
        if (o.outfile && !dec.qf) usage_error("option --out: with --decode, give the tensors too (--q, --k, --v)");
        decode_validate(&o, &dec);
        if (!o.check && !sanitize && !gpu_available())
            printf("step05 --decode runs the decode kernels, and needs an NVIDIA GPU: this machine has none usable (or this "
                   "build has no CUDA).\n05_cuda_fused/README.md has the real output of an H100.\n");
        gpu_require();
        return decode_main(&o, &dec, bench, sanitize);
    }
    if (bench && (o.given & OPT_GIVEN_SEQ) && (o.N < BENCH_N0 || o.N > BENCH_N1 || (o.N & (o.N - 1))))
        usage_error("option --seq: with --bench, the last N of the benchmark's (512, 1024, ..., 16384), not %ld", o.N);
    if (errors && o.dtype != DT_FP8) usage_error("option --errors goes with --dtype fp8 (the FP8 error table)");
    if (scaling >= 0 && (o.dtype != DT_FP8 || !o.qfile))
        usage_error("option --scaling goes with --dtype fp8 and --q/--k/--v (the scaling whose O --out writes)");
    if (o.dtype == DT_FP8) {
        if (backward || alibi)
            usage_error("option --dtype fp8 runs the FP8 kernels on their own (not with --backward or --alibi)");
        if (o.outfile && !o.qfile) usage_error("option --out: with --dtype fp8, give the tensors too (--q, --k, --v)");
        if (o.qfile && (bench || errors || o.check || sanitize || o.kernel))
            usage_error("option --q: with --dtype fp8 the reader's tensors go with the default run (not --bench, --errors, "
                        "--check, --sanitize-shapes or --kernel)");
        if (o.qfile && o.D != 64 && o.D != 128)
            usage_error("option --q: D = %ld; FP8's loop takes the kernels' head dims, 64 or 128", o.D);
        if (o.qfile) return fp8_main(&o, 0, 0, 0, scaling < 0 ? 1 : scaling); /* the CPU loop, any machine */
        fp8_kernel_option_check(&o);
        if (((!bench && !errors && !o.check) || (bench && (o.given & OPT_GIVEN_DIM))) && o.D != 64 && o.D != 128) {
            char ids[64];
            usage_error("option --dim: %ld is not supported in fp8 (%s: 64 or 128)", o.D,
                        kernel_ids_phrase(FAM_FP8, 1, ", ", ids, sizeof ids));
        }
        if (!bench) opts_gpu_grid(&o, 16);
        return fp8_main(&o, bench, errors, sanitize, 1);
    }
    if (o.check && !backward && !o.kernel && !gpu_available()) { /* the CPU half of the checks runs anywhere */
        fp8_cpu_checks();
        report_skip("step05", "no CUDA device (or no CUDA in this build): the kernels' checks need one; FP8's CPU half ran");
        return report_finish();
    }
    if (bench && (o.given & OPT_GIVEN_DIM) && o.D != 64 && o.D != 128)
        usage_error("option --dim: --bench times D = 64 and 128 (FlashAttention's shapes); --dim picks one of them, not %ld", o.D);
    if (!bench) opts_gpu_grid(&o, 16); /* the smallest row tile of any kernel; --bench chooses its own shapes */
    if (!bench && !backward && !fwd_dim_ok(o.dtype, o.D))
        usage_error("option --dim: %ld is not supported in %s (fp32 kernels: 8..128 in steps of 8; fp16/bf16 "
                    "tensor-core kernels: 64 or 128)", o.D, dtype_name(o.dtype));
    if (!bench && backward && !o.check && !bwd_dim_ok(o.dtype, o.D))
        usage_error("option --dim: %ld is not supported by the backward in %s (fp32: 16..128 in steps of 16; fp16/bf16: "
                    "64 or 128)", o.D, dtype_name(o.dtype));
#ifdef HAVE_CUDA
    kernel_option_check(&o, backward ? FAM_BACKWARD : FAM_FORWARD, sanitize, bench || o.check); /* --sanitize-shapes: every dtype and D */
#endif
    if (!o.check && !sanitize && !gpu_available()) /* a reader's first contact, on a laptop: say what is missed, and where */
        printf("step05 runs the fused CUDA kernels, and needs an NVIDIA GPU: this machine has none usable (or this "
               "build has no CUDA).\n"
               "What it shows on one: every kernel checked against a float64 reference, then timed against naive "
               "attention;\n05_cuda_fused/README.md has the real output of an H200.\n"
               "On this machine: ./step01 to ./step04, ./step06 (and ./step06 --train), ./step07 run on the CPU; "
               "make check runs their checks.\n");
    gpu_require(); /* exits 77 with one line when there is no GPU (or no CUDA in this build) */
#ifdef HAVE_CUDA
    if (o.check) return run_checks(o.kernel, !backward, backward || !o.kernel);
    if (sanitize) { /* compute-sanitizer's shapes: the forward kernels, then (no --kernel) the backward's at the same N */
        if (backward) return bwd_run_sanitize(&o);
        const int rc = fwd_run_sanitize(&o);
        return rc != EXIT_OK || o.kernel ? rc : bwd_run_sanitize(&o);
    }
    if (alibi) {
        if (bench || backward) usage_error("option --alibi runs on its own (not with --bench or --backward)");
        return alibi_run(&o);
    }
    /* ./step05 as the card types it (no --dtype, no --kernel, no files, no CSV): the first screen */
    const int first_screen = !(o.given & OPT_GIVEN_DTYPE) && !o.kernel && !o.qfile && !o.outfile && !o.csv;
    FILE *csv = o.csv ? csv_open(o.csv, CSV_HEADER) : NULL;
    int rc = backward ? (bench ? bwd_run_bench(&o, csv) : bwd_run_default(&o, csv, &bf))
                      : bench ? fwd_run_bench(&o, csv)
                      : first_screen ? fwd_run_first_screen(&o) : fwd_run_default(&o, csv);
    if (csv) fclose(csv);
    return rc;
#else
    (void)sanitize, (void)backward, (void)alibi;
    return EXIT_SKIP;
#endif
}
