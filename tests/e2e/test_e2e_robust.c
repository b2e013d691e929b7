// End-to-end tests of what no user action may do: lose work (a checkpoint replaced, a closed
// stdout or terminal killing a run, an output path that destroys an input, half a metrics row) or
// hang (a FIFO or a device as input, a decompression bomb, a memory limit). Issue #12; each test
// failed on the code before its fix.
#include "e2e_util.h"
#include "skip_report.h"

#include <sched.h>
#include <stb_image_write.h>
#include <sys/mount.h>
#include <zlib.h>

TestSuite(e2e_robust, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);
ReportHook(POST_ALL)(struct criterion_global_stats *stats) { skip_report(stats, "e2e_robust", NULL); }

static void expect_same_bytes(const char *path, const uint8_t *before, size_t n, const char *what) {
    size_t after_n;
    uint8_t *after = e2e_own(read_bytes(path, &after_n));
    cr_expect(after_n == n && memcmp(after, before, n) == 0, "%s was changed", what);
}

// ---- 1. an existing checkpoint is replaced only by the run that resumed from it, or on request ----

Test(e2e_robust, an_existing_checkpoint_is_replaced_only_when_resumed_or_with_overwrite) {
    char *data = e2e_synth(31);
    char *ckpt = e2e_path("best.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--epochs", "2", "--quiet", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    size_t n;
    uint8_t *best = e2e_own(read_bytes(ckpt, &n));

    // A new run at the same path: refused before it trains, the file untouched.
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--quiet", "--save", ckpt);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "--overwrite", "stderr");
    e2e_assert_contains(r.err, ckpt, "stderr");
    cr_expect_null(strstr(r.out, "epoch 1/"), "it trained before refusing:\n%s", r.out);
    expect_same_bytes(ckpt, best, n, "the existing checkpoint");

    // The run that resumed from it continues it in place.
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--epochs", "3", "--quiet", "--resume", ckpt, "--save", ckpt);
    e2e_assert_exit(&r, 0);
    cr_expect_eq(e2e_eval_checkpoint(data, e2e.mlp, ckpt).epoch, 3);

    // --overwrite: the user asked for it.
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--quiet", "--save", ckpt, "--overwrite");
    e2e_assert_exit(&r, 0);
    cr_expect_eq(e2e_eval_checkpoint(data, e2e.mlp, ckpt).epoch, 1);
}

// ---- 2. a closed stdout (`| head -1`) does not kill training ----

Test(e2e_robust, a_closed_stdout_does_not_stop_training_or_its_checkpoint) {
    char *data = e2e_synth(32);
    char *ckpt = e2e_path("p.safetensors");
    char *err_path = e2e_path("closed.err");
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fds[1], 1);
        dup2(err, 2);
        close(fds[0]);
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigemptyset(&dfl.sa_mask);
        for (int sig = 1; sig < NSIG; sig++) sigaction(sig, &dfl, NULL);
        prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
        execl(e2e.bin, e2e.bin, "--model", e2e.mlp, "--data", data, "--epochs", "3", "--sharing-strategy",
              "file_system", "--save", ckpt, (char *)NULL);
        _exit(121);
    }
    e2e.running = pid;
    close(fds[0]);  // the reader is gone before hogwild writes its first line
    close(fds[1]);
    e2e_run_result r = {.pid = pid};
    double deadline = hw_now() + E2E_RUN_TIMEOUT;
    while (waitpid(pid, &r.status, WNOHANG) == 0) {
        cr_assert_lt(hw_now(), deadline, "hogwild with a closed stdout did not end");
        e2e_sleep_ms(5);
    }
    e2e.running = 0;
    r.out = "";
    r.err = e2e_read_text(err_path);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.err, "stdout was closed", "stderr");
    e2e_assert_left_nothing(&r);
    cr_expect_eq(e2e_eval_checkpoint(data, e2e.mlp, ckpt).epoch, 3, "the checkpoint holds all 3 epochs");
}

// ---- 4. --save is checked before training ----

Test(e2e_robust, save_is_checked_before_training) {
    char *data = e2e_synth(33);
    char *fifo = e2e_path("fifo");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    const char *bad[][2] = {
        {e2e_path("no-such-folder/x.safetensors"), "no-such-folder"},
        {e2e.dir, "is a folder"},
        {fifo, "not a regular file"},
        {"/proc/hogwild-test.safetensors", "/proc"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e2e_run_result r;
        double started = hw_now();
        e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--epochs", "1", "--save", bad[i][0]);
        e2e_assert_exit(&r, 1);
        e2e_assert_contains(r.err, "--save", "stderr");
        e2e_assert_contains(r.err, bad[i][1], "stderr");
        cr_expect_null(strstr(r.out, "epoch 1/"), "--save %s: it trained an epoch first:\n%s", bad[i][0], r.out);
        cr_expect_lt(hw_now() - started, 10.0);
    }
}

// ---- 5. --save and --metrics never destroy an input ----

Test(e2e_robust, outputs_may_not_be_inputs) {
    char *data = e2e_synth(34);
    char *model = e2e_path("copy.model");  // a copy: the old code destroyed the file it was given
    size_t model_n;
    uint8_t *model_bytes = e2e_own(read_bytes(e2e.mlp, &model_n));
    write_bytes(model, model_bytes, model_n);
    char dataset_file[1200];
    snprintf(dataset_file, sizeof dataset_file, "%s/train-labels-idx1-ubyte.gz", data);
    size_t labels_n;
    uint8_t *labels = e2e_own(read_bytes(dataset_file, &labels_n));
    char *csv = e2e_path("m.csv");
    char *ckpt = e2e_path("c.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--model", model, "--data", data, "--quiet", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    size_t ckpt_n;
    uint8_t *ckpt_bytes = e2e_own(read_bytes(ckpt, &ckpt_n));

    e2e_run(&r, NULL, "--model", model, "--data", data, "--quiet", "--save", model, "--overwrite");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "model file", "stderr");
    e2e_run(&r, NULL, "--model", model, "--data", data, "--quiet", "--metrics", model);
    e2e_assert_exit(&r, 1);
    expect_same_bytes(model, model_bytes, model_n, "the model file");

    e2e_run(&r, NULL, "--model", model, "--data", data, "--quiet", "--save", dataset_file, "--overwrite");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "dataset file", "stderr");
    expect_same_bytes(dataset_file, labels, labels_n, "the dataset's label file");

    e2e_run(&r, NULL, "--model", model, "--data", data, "--quiet", "--save", csv, "--metrics", csv);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "same file", "stderr");

    e2e_run(&r, NULL, "--model", model, "--data", data, "--quiet", "--epochs", "2", "--resume", ckpt, "--metrics",
            ckpt);
    e2e_assert_exit(&r, 1);
    expect_same_bytes(ckpt, ckpt_bytes, ckpt_n, "the --resume checkpoint");
}

// ---- 6. a full disk leaves whole metrics rows, and the run goes on ----

// The file size limit (RLIMIT_FSIZE, inherited by the run) stands in for a full disk: writes past
// it fail (EFBIG), the last one short, as on a disk that fills up mid-row.
Test(e2e_robust, a_write_failure_leaves_only_whole_metrics_rows) {
    char *data = e2e_synth(35);
    char *csv = e2e_path("full.csv");
    struct rlimit old, small = {1500, 0};
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    small.rlim_max = old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);  // this process writes nothing while the limit is set
    e2e_run_result r;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    e2e_start_argv(&r, NULL,
                   (const char *const[]){"--model", e2e.mlp, "--data", data, "--mode", "dataparallel", "--epochs", "2",
                                         "--eval-every", "100", "--metrics", csv, "--quiet", NULL});
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    e2e_wait(&r);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.err, "training goes on without metrics", "stderr");
    e2e_done_line done = e2e_parse_done(r.out);
    cr_expect_eq(done.samples, 2 * E2E_TRAIN, "training went on to its end");
    e2e_assert_contains(r.out, "warning: the metrics file ", "the summary");
    e2e_assert_contains(r.out, " (--metrics): writing stopped after", "the summary");
    char *text = e2e_read_text(csv);
    size_t len = strlen(text);
    cr_assert_gt(len, 0);
    cr_expect_eq(text[len - 1], '\n', "the file ends with a whole row:\n%s", text);
    e2e_metrics_row rows[64];
    int n = e2e_read_metrics(csv, rows, 64);  // asserts 10 well-formed fields on every row
    cr_expect_gt(n, 3);
    cr_expect_lt(n, 60, "the limit stopped the rows");
    e2e_run(&r, NULL, "compare", csv, "--no-plot");
    e2e_assert_exit(&r, 0);
}

Test(e2e_robust, compare_reads_a_file_whose_last_row_was_cut_short) {
    char *csv = e2e_path("cut.csv");
    const char text[] =
        E2E_METRICS_HEADER "\n"
                           "hogwild,2,cpu,0.000,0,0,nan,2.300000,10.00,0,0.01,mlp,1,cbf29ce484222325,\n"
                           "hogwild,2,cpu,1.000,1,3000,1.000000,0.500000,85.00,0,0.01,mlp,1,cbf29ce484222325,\n"
                           "hogwild,2,cpu,2.0";
    write_bytes(csv, text, sizeof text - 1);
    e2e_run_result r;
    e2e_run(&r, NULL, "compare", csv, "--no-plot");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.err, "cut short", "stderr");
    // The reader (src/report/metrics_read.c) records the line; the command names itself.
    e2e_assert_contains(r.err, "hogwild compare: ", "stderr");
    e2e_assert_contains(r.err, "cut.csv:4: ignoring the last line, cut short (no newline)", "stderr");
    e2e_assert_contains(r.out, "85.00", "stdout");
}

// ---- 7. only regular files are read ----

// train/ and test/ image folders with classes 0 and 1, two 28x28 PNGs each.
static char *image_data(void) {
    char *root = e2e_path("images");
    uint8_t pixels[28 * 28];
    char path[1200];
    const char *const splits[] = {"train", "test"};
    for (int s = 0; s < 2; s++) {
        for (int c = 0; c < 2; c++) {
            snprintf(path, sizeof path, "%s/%s/%d", root, splits[s], c);
            char mk[1300];
            snprintf(mk, sizeof mk, "mkdir -p '%s'", path);
            cr_assert_eq(system(mk), 0);
            for (int i = 0; i < 2; i++) {
                memset(pixels, c ? 200 : 20, sizeof pixels);
                pixels[i] = 100;
                snprintf(path, sizeof path, "%s/%s/%d/%d.png", root, splits[s], c, i);
                cr_assert(stbi_write_png(path, 28, 28, 1, pixels, 28), "cannot write %s", path);
            }
        }
    }
    return root;
}

Test(e2e_robust, inputs_must_be_regular_files) {
    e2e_run_result r;
    e2e_run_within(&r, 10, NULL, "--model", "/dev/zero", "--summary");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "not a regular file", "stderr");

    char *fifo = e2e_path("model.fifo");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    e2e_run_within(&r, 10, NULL, "--model", fifo, "--summary");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "not a regular file", "stderr");

    char *images = image_data();
    e2e_run(&r, NULL, "--data", images, "--model", e2e.mlp, "--quiet");
    e2e_assert_exit(&r, 0);
    char png_fifo[1200];
    snprintf(png_fifo, sizeof png_fifo, "%s/test/1/x.png", images);
    cr_assert_eq(mkfifo(png_fifo, 0600), 0);
    e2e_run_within(&r, 10, NULL, "--data", images, "--model", e2e.mlp, "--quiet");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "x.png", "stderr");
    e2e_assert_contains(r.err, "not a regular file", "stderr");

    char *data = e2e_synth(36);
    e2e_run_within(&r, 10, NULL, "--data", data, "--model", e2e.mlp, "--eval-only", "--resume", fifo);
    e2e_assert_exit(&r, 1);
}

// ---- 8. a decompression bomb is refused before it is decoded ----

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void write_chunk(FILE *f, const char *type, const uint8_t *data, uint32_t n) {
    uint8_t head[8];
    put_be32(head, n);
    memcpy(head + 4, type, 4);
    fwrite(head, 1, 8, f);
    if (n) fwrite(data, 1, n, f);
    uLong crc = crc32(0, (const Bytef *)type, 4);
    if (n) crc = crc32(crc, data, n);
    uint8_t tail[4];
    put_be32(tail, (uint32_t)crc);
    fwrite(tail, 1, 4, f);
}

// A valid all-black grayscale PNG of side x side pixels: side^2 bytes of pixels in a small file.
static void write_png_bomb(const char *path, uint32_t side) {
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fwrite("\x89PNG\r\n\x1a\n", 1, 8, f);
    uint8_t ihdr[13] = {0};
    put_be32(ihdr, side);
    put_be32(ihdr + 4, side);
    ihdr[8] = 8;  // 8-bit gray
    write_chunk(f, "IHDR", ihdr, 13);
    z_stream z = {0};
    cr_assert_eq(deflateInit(&z, 9), Z_OK);
    uint8_t *row = calloc(side + 1, 1);  // filter byte 0, then black pixels
    size_t out_cap = 1 << 20;
    uint8_t *out = malloc(out_cap);
    for (uint32_t y = 0; y <= side; y++) {
        int last = y == side;
        z.next_in = row;
        z.avail_in = last ? 0 : side + 1;
        do {
            z.next_out = out;
            z.avail_out = (uInt)out_cap;
            deflate(&z, last ? Z_FINISH : Z_NO_FLUSH);
            uint32_t produced = (uint32_t)(out_cap - z.avail_out);
            if (produced) write_chunk(f, "IDAT", out, produced);
        } while (z.avail_out == 0);
    }
    deflateEnd(&z);
    write_chunk(f, "IEND", NULL, 0);
    fclose(f);
    free(row);
    free(out);
}

Test(e2e_robust, a_huge_image_is_refused_before_it_is_decoded) {
    char *images = image_data();
    const char *const splits[] = {"test", "train"};
    char bomb[1200];
    for (int s = 0; s < 2; s++) {
        snprintf(bomb, sizeof bomb, "%s/%s/0/bomb.png", images, splits[s]);
        write_png_bomb(bomb, 10000);  // 100 MB of pixels in about 100 KB
        e2e_run_result r;
        e2e_run(&r, NULL, "--data", images, "--model", e2e.mlp, "--quiet");
        e2e_assert_exit(&r, 1);
        e2e_assert_contains(r.err, "bomb.png", "stderr");
        e2e_assert_contains(r.err, "10000 x 10000", "stderr");
        e2e_assert_contains(r.err, "beyond the limit", "stderr");
        unlink(bomb);
    }
}

// ---- 9. a memory limit ends the run with a clear error ----

// Runs hogwild under RLIMIT_AS = `kib` KiB (set in this process around the fork, so the run
// inherits it), and waits at most `seconds`.
static void run_limited(e2e_run_result *r, long kib, double seconds, const char *const *args) {
    struct rlimit old, limited;
    cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
    limited.rlim_cur = (rlim_t)kib * 1024;
    limited.rlim_max = old.rlim_max;
    cr_assert_eq(setrlimit(RLIMIT_AS, &limited), 0);
    e2e_start_argv(r, NULL, args);
    cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
    e2e_wait_within(r, seconds);
}

Test(e2e_robust, a_memory_limit_ends_the_run_with_a_clear_error) {
    e2e_skip_under_asan();
    char *data = e2e_synth(37);
    char *ckpt = e2e_path("m.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--quiet", "--save", ckpt);  // LeNet
    e2e_assert_exit(&r, 0);
    const char *const train[] = {"--data", data, "--quiet", NULL};
    const char *const dataparallel[] = {"--data", data, "--quiet", "--mode", "dataparallel", NULL};
    const char *const eval[] = {"--data", data, "--eval-only", "--resume", ckpt, NULL};
    const char *const *runs[] = {train, dataparallel, eval};
    for (int i = 0; i < 3; i++) {
        run_limited(&r, 300000, 30, runs[i]);
        e2e_assert_exit(&r, 1);
        e2e_assert_contains(r.err, "ulimit -v", "stderr");
        e2e_assert_left_nothing(&r);
    }
}

// ---- 10. the CPU path needs no CUDA library ----

Test(e2e_robust, the_cpu_path_maps_no_cuda_library) {
    char command[1200];
    snprintf(command, sizeof command, "ldd '%s'", e2e.bin);
    FILE *p = popen(command, "r");
    cr_assert_not_null(p);
    char line[512];
    while (fgets(line, sizeof line, p)) {
        cr_expect_null(strstr(line, "libcuda"), "./hogwild links %s", line);
        cr_expect_null(strstr(line, "libcublas"), "./hogwild links %s", line);
        cr_expect_null(strstr(line, "libnccl"), "./hogwild links %s", line);
    }
    pclose(p);
    e2e_skip_under_asan();
    e2e_run_result r;
    run_limited(&r, 900000, 30, (const char *const[]){"--help", NULL});
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "--device", "--help");
    char *data = e2e_synth(38);
    run_limited(&r, 900000, 30, (const char *const[]){"--data", data, "--model", e2e.mlp, "--quiet", NULL});
    e2e_assert_exit(&r, 0);
}

// ---- the smaller things ----

// Hogwild workers do not wait for the parent's evaluations: points they pass meanwhile are not
// evaluated, and both the summary and the CSV (column skipped_eval_points, a running count) say
// how many.
Test(e2e_robust, skipped_eval_every_points_are_reported) {
    char *data = e2e_synth_n("data", 39, E2E_TRAIN, 2000);
    char *csv = e2e_path("e.csv");
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--eval-every", "10", "--metrics", csv, "--quiet");  // LeNet
    e2e_assert_exit(&r, 0);
    e2e_metrics_row rows[400];
    int n = e2e_read_metrics(csv, rows, 400);
    int asked = E2E_TRAIN / 10 - 1;  // 10, 20, ..., 2990; 3000 is the epoch end's row
    int mid_rows = n - 2;            // without the first and the epoch end's
    long long skipped = 0;
    const char *note = strstr(r.out, "note: ");
    if (mid_rows < asked) {
        cr_assert_not_null(note, "%d of %d points evaluated, and the summary does not say so:\n%s", mid_rows, asked,
                           r.out);
    }
    if (note) cr_assert_eq(sscanf(note, "note: %lld point(s)", &skipped), 1, "%s", note);
    cr_expect_eq(mid_rows + skipped, asked, "%d rows + %lld skipped points", mid_rows, skipped);
    for (int i = 1; i < n; i++) {
        cr_expect_geq(rows[i].skipped, rows[i - 1].skipped, "skipped_eval_points is a running count (row %d)", i + 1);
    }
    cr_expect_eq(rows[0].skipped, 0, "nothing skipped before training");
    cr_expect_eq(rows[n - 1].skipped, skipped, "the CSV's last row says %lld skipped, the summary %lld",
                 rows[n - 1].skipped, skipped);
}

Test(e2e_robust, eval_only_uses_the_checkpoints_own_model_from_any_folder) {
    char *data = e2e_synth(40);
    char *ckpt = e2e_path("mlp.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--quiet", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    char cwd[1024];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir(e2e.dir), 0);  // no models/ here
    e2e_run(&r, NULL, "--data", data, "--eval-only", "--resume", ckpt);
    cr_assert_eq(chdir(cwd), 0);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "accuracy", "stdout");
}

Test(e2e_robust, eval_only_refuses_save_and_metrics) {
    char *ckpt = e2e_path("x.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--eval-only", "--resume", ckpt, "--save", e2e_path("y.safetensors"));
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "--save", "stderr");
    e2e_run(&r, NULL, "--eval-only", "--resume", ckpt, "--metrics", e2e_path("y.csv"));
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "--metrics", "stderr");
}

Test(e2e_robust, flags_do_not_depend_on_their_order_or_blanks) {
    e2e_run_result r;
    e2e_run(&r, NULL, "--list-sharing-strategies", "--sharing-strategy", "file_system");
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "file_system (current)", "stdout");
    e2e_run(&r, NULL, "synth", "--bogus");
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "unknown option '--bogus'", "stderr");
    const char *const blanks[] = {" 3", "3 ", "\t3"};
    for (int i = 0; i < 3; i++) {
        e2e_run(&r, NULL, "--workers", blanks[i], "--data", e2e_path("none"));
        e2e_assert_exit(&r, 2);
        e2e_assert_contains(r.err, "--workers", "stderr");
    }
}

Test(e2e_robust, a_checkpoint_with_nan_weights_is_reported) {
    char *data = e2e_synth(41);
    char *ckpt = e2e_path("nan.safetensors");
    e2e_run_result r;
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--quiet", "--save", ckpt);
    e2e_assert_exit(&r, 0);
    size_t n, data_bytes;
    uint8_t *bytes = e2e_own(read_bytes(ckpt, &n));
    uint8_t *weights = (uint8_t *)e2e_safetensors_data(bytes, n, &data_bytes);
    const float nan_value = NAN;
    for (size_t i = 0; i + 4 <= data_bytes; i += 4) memcpy(weights + i, &nan_value, 4);
    write_bytes(ckpt, bytes, n);
    e2e_run(&r, NULL, "--data", data, "--model", e2e.mlp, "--eval-only", "--resume", ckpt);
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "not finite", "stderr");
}

// A name whose pid now belongs to a process that started after the name was made is stale: the
// pid was reused. In private pid and mount namespaces, the pids are known in advance: the name
// for pid 2 is made, then pid 1 (a sleeper) and pid 2 (hogwild --clean-shm itself) start. A name
// for pid 1 made after it started is kept. The namespaces are made in a helper process (the test
// process keeps its own, for the harness and the sanitizers); it writes hogwild's stdout and
// whether the kept name is still there to files. Skipped where the namespaces cannot be made.
enum { NS_UNAVAILABLE = 77 };

static int clean_shm_in_namespaces(const char *out_path, const char *kept_path) {
    if (unshare(CLONE_NEWNS | CLONE_NEWPID) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0) {
        return NS_UNAVAILABLE;
    }
    int fd = open("/dev/shm/hogwild-2-0", O_WRONLY | O_CREAT, 0600);
    if (fd < 0) return 1;
    close(fd);
    e2e_sleep_ms(300);
    int ready[2];
    if (pipe(ready) != 0) return 1;
    pid_t init = fork();  // pid 1 of the new namespace
    if (init < 0) return 1;
    if (init == 0) {
        // /proc of this namespace, so that hogwild reads the start times of its own pids.
        if (mount("proc", "/proc", "proc", 0, NULL) != 0 || write(ready[1], "x", 1) != 1) _exit(1);
        for (;;) pause();
    }
    char c;
    if (read(ready[0], &c, 1) != 1) return 1;
    e2e_sleep_ms(300);
    fd = open("/dev/shm/hogwild-1-0", O_WRONLY | O_CREAT, 0600);
    if (fd < 0) return 1;
    close(fd);
    pid_t run = fork();  // pid 2
    if (run == 0) {
        int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(out, 1);
        execl(e2e.bin, e2e.bin, "--clean-shm", (char *)NULL);
        _exit(121);
    }
    int status = 0;
    waitpid(run, &status, 0);
    if (access("/dev/shm/hogwild-1-0", F_OK) == 0) write_bytes(kept_path, "kept", 4);
    kill(init, SIGKILL);
    waitpid(init, NULL, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

Test(e2e_robust, clean_shm_tells_a_reused_pid_apart) {
    char *out = e2e_path("clean.out"), *kept = e2e_path("kept");
    fflush(NULL);
    pid_t helper = fork();
    cr_assert_neq(helper, -1);
    if (helper == 0) _exit(clean_shm_in_namespaces(out, kept));  // _exit: no sanitizer exit checks here
    int status = 0;
    cr_assert_eq(waitpid(helper, &status, 0), helper);
    cr_assert(WIFEXITED(status), "the helper was killed: %#x", status);
    if (WEXITSTATUS(status) == NS_UNAVAILABLE) cr_skip_test("cannot make private pid and mount namespaces here");
    cr_assert_eq(WEXITSTATUS(status), 0, "hogwild --clean-shm exit status");
    char *text = e2e_read_text(out);
    e2e_assert_contains(text, "removed 1 stale", "stdout");
    e2e_assert_contains(text, "removed /dev/shm/hogwild-2-0: its pid now belongs", "stdout");
    e2e_assert_contains(text, "kept /dev/shm/hogwild-1-0", "stdout");
    cr_expect(e2e_file_exists(kept), "the live process's name is kept");
}
