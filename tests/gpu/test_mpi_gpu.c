// End-to-end tests of DataParallel on GPU ranks (src/cuda/train/dataparallel_gpu.c, src/cuda/ranks.cu):
// ./hogwild --device cuda run by mpirun with 2 ranks on this host, NCCL between them. On a GPU
// machine they need 2 GPUs (one per rank: NCCL cannot put two ranks on one GPU), else they skip
// saying so. In `make sim` they run on the simulated device (2 simulated GPUs) and its NCCL across
// processes (tests/simcuda/nccl.c): the real control flow (unique id by MPI_Bcast,
// ncclCommInitRank, the GPU of the local rank, the sum on the stream polled within
// --sync-timeout, the weights check), but neither the real NCCL nor a GPU's rounding.
#include "gpu_tests.h"
#include "mpi_util.h"

static void mpi_gpu_teardown(void) {
    e2e_teardown();
    mpi_remove_shm_dir();
}

TestSuite(mpi_gpu, .init = e2e_setup, .fini = mpi_gpu_teardown, .timeout = 240);

// (Criterion names a hook after its line: this one must not share a line number with another file's.)
ReportHook(POST_ALL)(struct criterion_global_stats *stats) { gpu_suite_report(stats, "mpi_gpu"); }

// Skips without mpirun or without `gpus` GPUs (saying why); sets up mpirun as test_mpi.c does.
// Returns the number of GPUs.
static int need_mpirun_and_gpus(int gpus, const char *why) {
    if (!mpi_find_mpirun()) cr_skip_test("mpirun is not installed (apt-get install openmpi-bin libopenmpi-dev)");
    int count = gpus > 0 ? skip_without_gpu() : 0;
    if (count < gpus) cr_skip_test("%s needs %d GPUs, this machine has %d", why, gpus, count);
    mpi_setup_environment();
    return count;
}

// 2 GPU ranks x 2 replicas train the global batch split 4 ways: the same weights after 2 epochs
// as 1 process with 4 replicas on one GPU, to float rounding (the sums' order differs), every
// epoch end checked equal across the ranks; rank 0 alone prints, names NCCL, and reports.
Test(mpi_gpu, dataparallel_two_gpu_ranks_of_two_replicas_equal_one_process_of_four) {
    need_mpirun_and_gpus(2, "2 GPU ranks on one host");
    char *data = e2e_synth(71);
    char *across = e2e_path("across.safetensors"), *one = e2e_path("one.safetensors");
    char *metrics = e2e_path("across.csv");
    e2e_run_result r;
    mpi_run(&r, "-np", "2", "HW", "--mode", "dataparallel", "--device", "cuda", "--replicas", "2", "--model", e2e.mlp,
            "--data", data, "--epochs", "2", "--metrics", metrics, "--save", across);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "DataParallel, 2 ranks x replicas 2", "stdout");
    e2e_assert_contains(r.out, "DataParallel on 2 GPU ranks x 2 replica(s)", "stdout");
    e2e_assert_contains(r.out, "across ranks ncclAllReduce across 2 ranks", "stdout");
    cr_expect_null(strstr(strstr(r.out, "hogwild: DataParallel") + 1, "hogwild: DataParallel"),
                   "more than one rank printed:\n%s", r.out);
    e2e_done_line done = e2e_parse_done(r.out);
    cr_expect_eq(done.samples, 2 * E2E_TRAIN);
    cr_expect_gt(done.accuracy, 60, "accuracy %.2f%% after 2 epochs", done.accuracy);
    e2e_metrics_row rows[8];
    cr_assert_eq(e2e_read_metrics(metrics, rows, 8), 3);
    cr_expect_eq(rows[2].workers, 4, "the metrics count the world's replicas");
    assert_mpi_left_nothing();

    e2e_run(&r, NULL, "--mode", "dataparallel", "--device", "cuda", "--replicas", "4", "--model", e2e.mlp, "--data",
            data, "--epochs", "2", "--quiet", "--save", one);
    e2e_assert_exit(&r, 0);
    size_t differ, n_one;
    double worst = checkpoints_max_difference(across, one, &differ, &n_one);
    // 94 steps of the same sums in another order: rounding, far below one step's change (a rank
    // that trained the whole batch alone, or a sum that missed a rank, moves weights by ~1e-3).
    cr_expect_lt(worst, 1e-5, "largest difference %g over %zu weights", worst, n_one);
    cr_log_info("2 GPU ranks x 2 replicas vs 1 x 4: %zu of %zu weights differ, by %g at most", differ, n_one, worst);
}

// NCCL cannot put two ranks on one GPU: a host with too few GPUs for its ranks is refused before
// NCCL, naming the host, the rank and the reason. (--device cuda:B starts the ranks at GPU B: the
// last GPU leaves none for local rank 1.)
Test(mpi_gpu, dataparallel_two_gpu_ranks_on_one_gpu_are_refused) {
    int gpus = need_mpirun_and_gpus(1, "a GPU rank");
    char *data = e2e_synth(72);
    char device[32];
    snprintf(device, sizeof device, "cuda:%d", gpus - 1);
    e2e_run_result r;
    mpi_run(&r, "-np", "2", "HW", "--mode", "dataparallel", "--device", device, "--replicas", "1", "--model", e2e.mlp,
            "--data", data, "--epochs", "1");
    e2e_assert_exit(&r, 1);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    char expected[160];
    snprintf(expected, sizeof expected, "rank 1 of 2 on host %s is local rank 1 there, so it would drive cuda:%d", host,
             gpus);
    e2e_assert_contains(r.err, expected, "stderr");
    e2e_assert_contains(r.err, "NCCL cannot put two ranks on one GPU", "stderr");
    snprintf(expected, sizeof expected, "cuda:%d, the device cuda:%d (--device) plus its local rank", gpus, gpus - 1);
    e2e_assert_contains(r.err, expected, "stderr");
    e2e_assert_contains(r.err, "each rank's GPU taking several replicas (--replicas)", "stderr");
    assert_mpi_left_nothing();
}

// A rank on a host without a GPU (rank 1 sees none: CUDA_VISIBLE_DEVICES empty on a GPU machine,
// HW_SIM_DEVICES=0 on the simulated device) ends the job naming the host and the rank.
Test(mpi_gpu, dataparallel_a_gpu_rank_without_a_gpu_ends_the_job_naming_it) {
    need_mpirun_and_gpus(1, "a GPU rank");
    char *data = e2e_synth(73);
    e2e_run_result r;
    mpi_run(&r, "-np", "1", "HW", "--mode", "dataparallel", "--device", "cuda", "--replicas", "1", "--model", e2e.mlp,
            "--data", data, "--epochs", "1", ":", "-np", "1", "-x", "CUDA_VISIBLE_DEVICES=", "-x", "HW_SIM_DEVICES=0",
            "HW", "--mode", "dataparallel", "--device", "cuda", "--replicas", "1", "--model", e2e.mlp, "--data", data,
            "--epochs", "1");
    e2e_assert_exit(&r, 1);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    char expected[160];
    snprintf(expected, sizeof expected, "rank 1 of 2 on host %s has no GPU for the device cuda (--device)", host);
    e2e_assert_contains(r.err, expected, "stderr");
    assert_mpi_left_nothing();
}

// Waits until mpirun (r) runs 2 ranks and rank 0 has printed `ready` (DataParallel: how it sums,
// once the NCCL communicator is up), then a second more so that they train; their pids go to
// kids[0..2).
static void wait_for_two_training_gpu_ranks(const e2e_run_result *r, pid_t kids[2], const char *ready) {
    double deadline = hw_now() + 60;
    mpi_find_two_ranks(r, kids, deadline);
    for (;;) {  // `ready` on stdout, or on stderr (the progress line, every 5 s without a terminal)
        char *out = e2e_read_text(r->out_path), *err = e2e_read_text(r->err_path);
        if (strstr(out, ready) || strstr(err, ready)) break;
        cr_assert_lt(hw_now(), deadline, "the ranks did not start training:\n%s", out);
        e2e_sleep_ms(50);
    }
    e2e_sleep_ms(1000);
}

// Ctrl-C on mpirun (r, started by mpi_start_for_ctrl_c) once its 2 ranks train (rank 0 printed `ready`): the job ends
// non-zero, rank 0 having saved its current weights to `ckpt`, and leaves nothing behind.
static void expect_ctrl_c_saves_rank_0(e2e_run_result *r, const char *ready, const char *data, const char *ckpt) {
    pid_t kids[2];
    wait_for_two_training_gpu_ranks(r, kids, ready);
    kill(r->pid, SIGINT);
    e2e_wait_within(r, 60);
    cr_expect(WIFEXITED(r->status) && WEXITSTATUS(r->status) != 0, "mpirun: status %d", r->status);
    e2e_assert_contains(r->out, "saved the current weights to", "stdout");
    cr_expect_geq(e2e_eval_checkpoint(data, e2e.mlp, ckpt).samples, 1, "the checkpoint holds no training");
    assert_mpi_left_nothing();
}

// A rank stopped (SIGSTOP) leaves the other waiting for the step's sum: NCCL's on the GPU, polled
// within --sync-timeout (then ncclCommAbort), or the MPI sum of the step's counters after it,
// bounded the same; either way a clear error naming --sync-timeout, exit 1, not a hang. Batches of
// 4, so that the stop lands within an epoch's 5000 steps: with batches of 64 an epoch took less
// than the second the test waits, and make test once stopped the rank at an epoch end's weights
// check instead.
Test(mpi_gpu, dataparallel_a_gpu_sum_past_sync_timeout_ends_the_job) {
    need_mpirun_and_gpus(2, "2 GPU ranks on one host");
    char *data = e2e_synth_n("data", 74, 20000, 200);
    e2e_run_result r;
    mpi_start(&r, (const char *const[]){"-np",
                                        "2",
                                        "HW",
                                        "--mode",
                                        "dataparallel",
                                        "--device",
                                        "cuda",
                                        "--replicas",
                                        "1",
                                        "--model",
                                        e2e.mlp,
                                        "--data",
                                        data,
                                        "--epochs",
                                        "1000",
                                        "--batch-size",
                                        "4",
                                        "--sync-timeout",
                                        "2",
                                        NULL});
    pid_t kids[2];
    wait_for_two_training_gpu_ranks(&r, kids, "across ranks ncclAllReduce");
    mpi_stop_rank_expecting_the_end(&r, kids[1], 30);
    e2e_assert_contains(r.err, "a step's gradient sum", "stderr");
    e2e_assert_contains(r.err, "has not completed within the ranks' timeout of 2 s (--sync-timeout)", "stderr");
    // Which wait noticed it: NCCL's (the stopped rank had not posted its gradient) or the MPI
    // sum of the step's counters (it had).
    const char *line = strstr(r.err, "has not completed in 2 s");
    cr_log_info("noticed by %s", line && strstr(r.err, "(ncclAllReduce) has not completed") ? "the NCCL sum's poll"
                                                                                            : "the MPI counters' sum");
}

// --gpus (one process's GPUs) has no meaning across ranks, in either mode: refused as a usage
// error, before any training.
Test(mpi_gpu, gpus_lists_across_ranks_are_refused) {
    need_mpirun_and_gpus(0, "");
    char *data = e2e_synth(75);
    e2e_run_result r;
    mpi_run(&r, "-np", "2", "HW", "--mode", "dataparallel", "--gpus", "0,1", "--model", e2e.mlp, "--data", data);
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "across ranks each rank drives one GPU", "stderr");
    mpi_run(&r, "-np", "2", "HW", "--gpus", "0,1", "--workers", "2", "--model", e2e.mlp, "--data", data);
    e2e_assert_exit(&r, 2);
    e2e_assert_contains(r.err, "across ranks each rank drives one GPU", "stderr");
    assert_mpi_left_nothing();
}

// ---- Hogwild on GPU ranks (src/cuda/train/hogwild_gpu.c with src/comm/mpi/hogwild_coupling.c) ----

// 2 GPU ranks x 2 workers, each rank's workers on the GPU of its local rank, coupled as CPU nodes
// are: rank 0 alone prints, reports the coupling, counts the world's samples and workers, and
// trains as one process of 4 workers on one GPU does, within a few points (both race). A round
// every 128 samples of a node, not every 20 ms: on a loaded machine a run this short (a second)
// otherwise has a handful of rounds, and trails one GPU by more than the rule does.
Test(mpi_gpu, hogwild_two_gpu_ranks_train_as_one_gpu_does) {
    need_mpirun_and_gpus(2, "2 GPU ranks on one host");
    char *data = e2e_synth_n("data", 76, 20000, 1000);
    char *ckpt = e2e_path("across.safetensors"), *metrics = e2e_path("across.csv");
    e2e_run_result r;
    mpi_run(&r, "-np", "2", "HW", "--device", "cuda", "--workers", "2", "--model", e2e.mlp, "--data", data, "--epochs",
            "2", "--lr", "0.05", "--sync-every", "128", "--metrics", metrics, "--save", ckpt);
    e2e_assert_exit(&r, 0);
    e2e_assert_contains(r.out, "Hogwild, 2 ranks x workers 2", "stdout");
    e2e_assert_contains(r.out, "coupling (rank 0 of 2)", "stdout");
    cr_expect_null(strstr(strstr(r.out, "hogwild: Hogwild") + 1, "hogwild: Hogwild"), "more than one rank printed:\n%s",
                   r.out);
    e2e_done_line done = e2e_parse_done(r.out);
    cr_expect_eq(done.samples, 2 * 20000);
    e2e_metrics_row rows[8];
    cr_assert_eq(e2e_read_metrics(metrics, rows, 8), 3);
    cr_expect_eq(rows[2].workers, 4, "the metrics count the world's workers");
    // The checkpoint is the weights every rank agreed on at the end: the accuracy rank 0 reported.
    e2e_ckpt_info info = e2e_eval_checkpoint(data, e2e.mlp, ckpt);
    cr_expect_eq(info.accuracy, done.accuracy, "reported %.2f%%, the checkpoint %.2f%%", done.accuracy, info.accuracy);
    assert_mpi_left_nothing();

    e2e_run_within(&r, 120, NULL, "--device", "cuda", "--workers", "4", "--model", e2e.mlp, "--data", data, "--epochs",
                   "2", "--lr", "0.05", "--quiet");
    e2e_assert_exit(&r, 0);
    double one = e2e_parse_done(r.out).accuracy;
    cr_log_info("2 GPU ranks x 2 workers %.2f%%, one GPU x 4 %.2f%%", done.accuracy, one);
    cr_expect_gt(done.accuracy, one - 4.0, "2 GPU ranks %.2f%%, one GPU %.2f%%", done.accuracy, one);
}

// Local rank L drives GPU B + L: past the host's last GPU, the job ends naming the rank's GPU.
Test(mpi_gpu, hogwild_a_gpu_rank_past_the_last_gpu_ends_the_job) {
    int gpus = need_mpirun_and_gpus(1, "a GPU rank");
    char *data = e2e_synth(77);
    char device[32], expected[96];
    snprintf(device, sizeof device, "cuda:%d", gpus - 1);
    e2e_run_result r;
    mpi_run(&r, "-np", "2", "HW", "--device", device, "--workers", "1", "--model", e2e.mlp, "--data", data, "--epochs",
            "1");
    e2e_assert_exit(&r, 1);
    snprintf(expected, sizeof expected, "hogwild (rank 1 of 2): GPU Hogwild on cuda:%d: cuda:%d does not exist", gpus,
             gpus);
    e2e_assert_contains(r.err, expected, "stderr");
    assert_mpi_left_nothing();
}

// B of --device cuda:B is each rank's own (README, "DataParallel on GPU ranks"): ranks given
// different ones train, where a rank with another setting ends the job as disagreeing. Here rank
// 0 (local rank 0) on cuda:1 + 0 and rank 1 (local rank 1) on cuda:0 + 1: both on GPU 1.
Test(mpi_gpu, hogwild_ranks_may_name_different_first_gpus) {
    need_mpirun_and_gpus(2, "ranks on GPUs 0 + 1 and 1 + 0");
    char *data = e2e_synth_n("data", 78, 2000, 200);
    e2e_run_result r;
    mpi_run(&r, "-np", "1", "HW", "--device", "cuda:1", "--workers", "1", "--model", e2e.mlp, "--data", data,
            "--epochs", "1", ":", "-np", "1", "HW", "--device", "cuda:0", "--workers", "1", "--model", e2e.mlp,
            "--data", data, "--epochs", "1");
    e2e_assert_exit(&r, 0);
    cr_expect_null(strstr(r.err, "disagree"), "stderr: %s", r.err);
    e2e_assert_contains(r.out, "Hogwild, 2 ranks x workers 1", "stdout");
    cr_expect_eq(e2e_parse_done(r.out).samples, 2000);
    assert_mpi_left_nothing();
    // Another kind of device still disagrees.
    mpi_run(&r, "-np", "1", "HW", "--device", "cuda:0", "--workers", "1", "--model", e2e.mlp, "--data", data,
            "--epochs", "1", ":", "-np", "1", "HW", "--device", "cpu", "--workers", "1", "--model", e2e.mlp, "--data",
            data, "--epochs", "1");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "the ranks disagree on the device", "stderr");
    assert_mpi_left_nothing();
}

// Ctrl-C on mpirun reaches the GPU ranks as SIGTERM: rank 0 saves the weights of its GPU.
Test(mpi_gpu, hogwild_ctrl_c_on_mpirun_saves_rank_0s_gpu_checkpoint) {
    need_mpirun_and_gpus(2, "2 GPU ranks on one host");
    char *data = e2e_synth_n("data", 79, 20000, 200);
    char *ckpt = e2e_path("interrupted.safetensors");
    e2e_run_result r;
    mpi_start_for_ctrl_c(&r, (const char *const[]){"-np", "2", "HW", "--device", "cuda", "--workers", "2", "--model",
                                                   e2e.mlp, "--data", data, "--epochs", "1000", "--save", ckpt, NULL});
    // Rank 0's first progress line: it trains (its start-up line came too early under ASan).
    expect_ctrl_c_saves_rank_0(&r, " samples/s ", data, ckpt);
}

// A worker of rank 1 fails: the job ends, naming it and its GPU.
Test(mpi_gpu, hogwild_a_failing_gpu_rank_worker_ends_the_job) {
    need_mpirun_and_gpus(2, "2 GPU ranks on one host");
    char *data = e2e_synth(78);
    e2e_run_result r;
    mpi_run(&r, "-np", "1", "HW", "--device", "cuda", "--workers", "2", "--model", e2e.mlp, "--data", data, "--epochs",
            "2", ":", "-np", "1", "-x", "HOGWILD_FAIL_WORKER=1:3", "HW", "--device", "cuda", "--workers", "2",
            "--model", e2e.mlp, "--data", data, "--epochs", "2");
    e2e_assert_exit(&r, 1);
    // Rank 1 is local rank 1: its workers train on cuda:1.
    e2e_assert_contains(r.err, "hogwild (rank 1 of 2): worker 1 on cuda:1 failed", "stderr");
    e2e_assert_contains(r.err, "injected failure after 3 batches", "stderr");
    assert_mpi_left_nothing();
}

// The sum across ranks in one process, a world of 1 rank (the one case a machine with one GPU
// can run on the real NCCL): ncclGetUniqueId, ncclCommInitRank, ncclAllReduce polled on the
// stream, then the copies to the rank's other replicas, ordered before replica 0's next write.
Test(mpi_gpu, ranks_sum_of_a_world_of_one_reaches_every_replica) {
    skip_without_gpu();
    enum { N = 4099, K = 2 };
    const int devices[K] = {0, 0};
    float *buffers[K];
    hw_cuda_stream streams[K];
    float *host = malloc(N * sizeof(float));
    cr_assert_not_null(host);
    cr_assert_eq(hw_cuda_select((hw_device){HW_DEVICE_CUDA, 0}), HW_OK, "%s", hw_error());
    for (int k = 0; k < K; k++) {
        cr_assert_eq(hw_cuda_stream_create(&streams[k]), HW_OK, "%s", hw_error());
        cr_assert_eq(hw_cuda_malloc((void **)&buffers[k], N * sizeof(float)), HW_OK, "%s", hw_error());
        for (int i = 0; i < N; i++) host[i] = (float)(k * N + i) * 0.5f;
        cr_assert_eq(hw_cuda_memcpy_h2d(buffers[k], host, N * sizeof(float), streams[k]), HW_OK, "%s", hw_error());
        cr_assert_eq(hw_cuda_stream_sync(streams[k]), HW_OK, "%s", hw_error());
    }
    unsigned char id[HW_NCCL_ID_BYTES];
    cr_assert_eq(hw_cuda_ranks_id(id), HW_OK, "%s", hw_error());
    hw_cuda_ranks *ranks = NULL;
    cr_assert_eq(hw_cuda_ranks_open(&ranks, id, 0, 1, devices, K, N), HW_OK, "%s", hw_error());
    cr_expect_not_null(strstr(hw_cuda_ranks_method(ranks), "ncclAllReduce across 1 ranks"), "%s",
                       hw_cuda_ranks_method(ranks));
    cr_assert_eq(hw_cuda_ranks_sum(ranks, buffers, streams, 10), HW_OK, "%s", hw_error());
    // Replica 0's next write (here a memset on its stream) must not reach the copies.
    cr_assert_eq(hw_cuda_memset(buffers[0], 0, N * sizeof(float), streams[0]), HW_OK, "%s", hw_error());
    for (int k = 0; k < K; k++) {
        cr_assert_eq(hw_cuda_memcpy_d2h(host, buffers[k], N * sizeof(float), streams[k]), HW_OK, "%s", hw_error());
        cr_assert_eq(hw_cuda_stream_sync(streams[k]), HW_OK, "%s", hw_error());
        for (int i = 0; i < N; i++) {
            // A world of one sums one term: replica 0's values, on every replica (0 again after the memset).
            float want = k == 0 ? 0.0f : (float)i * 0.5f;
            cr_assert_eq(host[i], want, "replica %d, element %d: %g, want %g", k, i, (double)host[i], (double)want);
        }
    }
    hw_cuda_ranks_free(ranks);
    for (int k = 0; k < K; k++) {
        hw_cuda_free(buffers[k]);
        hw_cuda_stream_destroy(streams[k]);
    }
    free(host);
}

// The number of GPUs, counted in a child process, so that this one has not started CUDA and may
// still fork processes that use it. Skips the test, saying why, without a GPU.
static int gpu_count_in_a_child(void) {
    fflush(NULL);
    pid_t child = fork();
    cr_assert_neq(child, -1, "fork: %s", strerror(errno));
    if (child == 0) {
        int count = 0;
        _exit(hw_cuda_device_count(&count) == HW_OK ? (count < 100 ? count : 100) : 200);
    }
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status), "the child counting GPUs died: status %d", status);
    if (WEXITSTATUS(status) == 200) cr_skip_test("no CUDA device (counted in a child process)");
    return WEXITSTATUS(status);
}

// A rank that joined the communicator but never sums (a child process standing for a rank that
// is stuck): the other's sum is polled on the stream and ends at the timeout with an error
// naming --sync-timeout, the communicator aborted, not a hang. The child is forked before this
// process starts CUDA or NCCL (a process forked after cannot use CUDA); it makes the unique id
// and sends it through a pipe, as rank 0 would through MPI.
Test(mpi_gpu, ranks_sum_ends_at_the_timeout_when_a_rank_never_sums) {
    if (gpu_count_in_a_child() < 2) cr_skip_test("2 ranks need 2 GPUs (one each), this machine has fewer");
    enum { N = 1000 };
    int pipe_fds[2];
    cr_assert_eq(pipe(pipe_fds), 0, "pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t child = fork();
    cr_assert_neq(child, -1, "fork: %s", strerror(errno));
    if (child == 0) {
        // Rank 1: makes the id, joins on GPU 1, then waits for ever without summing.
        unsigned char id[HW_NCCL_ID_BYTES];
        const int device[1] = {1};
        hw_cuda_ranks *ranks = NULL;
        if (hw_cuda_ranks_id(id) != HW_OK || write(pipe_fds[1], id, sizeof id) != (ssize_t)sizeof id ||
            hw_cuda_select((hw_device){HW_DEVICE_CUDA, 1}) != HW_OK ||
            hw_cuda_ranks_open(&ranks, id, 1, 2, device, 1, N) != HW_OK) {
            fprintf(stderr, "rank 1: %s\n", hw_error());
            _exit(1);
        }
        for (;;) pause();
    }
    close(pipe_fds[1]);
    unsigned char id[HW_NCCL_ID_BYTES];
    ssize_t got = read(pipe_fds[0], id, sizeof id);
    close(pipe_fds[0]);
    if (got != (ssize_t)sizeof id) kill(child, SIGKILL);
    cr_assert_eq(got, (ssize_t)sizeof id, "the child sent no unique id");
    const int device[1] = {0};
    float *buffer = NULL;
    hw_cuda_stream stream = NULL;
    cr_assert_eq(hw_cuda_select((hw_device){HW_DEVICE_CUDA, 0}), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_cuda_stream_create(&stream), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_cuda_malloc((void **)&buffer, N * sizeof(float)), HW_OK, "%s", hw_error());
    cr_assert_eq(hw_cuda_memset(buffer, 0, N * sizeof(float), stream), HW_OK, "%s", hw_error());
    hw_cuda_ranks *ranks = NULL;
    int opened = hw_cuda_ranks_open(&ranks, id, 0, 2, device, 1, N);
    if (opened != HW_OK) kill(child, SIGKILL);
    cr_assert_eq(opened, HW_OK, "%s", hw_error());
    double started = hw_now();
    int summed = hw_cuda_ranks_sum(ranks, &buffer, &stream, 1.0);
    double took = hw_now() - started;
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    cr_assert_eq(summed, HW_ERR, "a sum with a rank that never sums completed");
    cr_expect_not_null(strstr(hw_error(), "rank 0 of 2 (host "), "%s", hw_error());
    // In the module's terms: this test process has no command line to name the flag.
    cr_expect_not_null(strstr(hw_error(), "cuda:0): a step's gradient sum (ncclAllReduce) has not completed within the "
                                          "ranks' timeout of 1 s: "),
                       "%s", hw_error());
    cr_expect(took >= 1.0 && took < 10, "the sum gave up after %.2f s, for a timeout of 1 s", took);
    // The communicator was aborted: a later sum says so at once.
    cr_expect_eq(hw_cuda_ranks_sum(ranks, &buffer, &stream, 1.0), HW_ERR);
    cr_expect_not_null(strstr(hw_error(), "aborted after an earlier failure"), "%s", hw_error());
    hw_cuda_ranks_free(ranks);
    hw_cuda_free(buffer);
    hw_cuda_stream_destroy(stream);
}

// Ranks that do not take the same step (rank 1 given another --lr: an MPMD command line) are
// refused at start-up, naming the flag (issue 21: before that check they trained, and only the
// epoch end's check of the weights stopped them). Ranks given the same settings but different
// checkpoints to resume from (same epoch and samples, other weights) pass that check and are
// stopped by the check of the weights at the start.
Test(mpi_gpu, dataparallel_gpu_ranks_whose_weights_differ_end_the_job) {
    need_mpirun_and_gpus(2, "2 GPU ranks on one host");
    char *data = e2e_synth(76);
    e2e_run_result r;
    mpi_run(&r, "-np", "1", "HW", "--mode", "dataparallel", "--device", "cuda", "--replicas", "1", "--model", e2e.mlp,
            "--data", data, "--epochs", "2", ":", "-np", "1", "HW", "--mode", "dataparallel", "--device", "cuda",
            "--replicas", "1", "--model", e2e.mlp, "--data", data, "--epochs", "2", "--lr", "0.02");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "the ranks disagree on the learning rate (--lr): rank 0 has 0.01, rank 1 has 0.02",
                        "stderr");
    cr_expect_eq(strstr(r.out, "epoch 1/2"), NULL, "the job trained:\n%s", r.out);
    assert_mpi_left_nothing();

    char *a = e2e_path("a.safetensors"), *b = e2e_path("b.safetensors");
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--quiet", "--save", a);
    e2e_assert_exit(&r, 0);
    e2e_run(&r, NULL, "--model", e2e.mlp, "--data", data, "--quiet", "--save", b, "--lr", "0.02");
    e2e_assert_exit(&r, 0);
    // --resume restores each checkpoint's rate (0.01 and 0.02), which the ranks would disagree on
    // first: one --lr for both leaves the weights as the only difference.
    mpi_run(&r, "-np", "1", "HW", "--mode", "dataparallel", "--device", "cuda", "--replicas", "1", "--model", e2e.mlp,
            "--data", data, "--epochs", "2", "--resume", a, "--lr", "0.01", ":", "-np", "1", "HW", "--mode",
            "dataparallel", "--device", "cuda", "--replicas", "1", "--model", e2e.mlp, "--data", data, "--epochs", "2",
            "--resume", b, "--lr", "0.01");
    e2e_assert_exit(&r, 1);
    e2e_assert_contains(r.err, "the ranks' weights differ at the start", "stderr");
    cr_expect_eq(strstr(r.out, "epoch 2/2"), NULL, "the job trained:\n%s", r.out);
    assert_mpi_left_nothing();
}

// Ctrl-C on mpirun: every rank gets SIGTERM, not at the same step; the ranks agree on the stop in
// a step's sum and leave after the same step, and rank 0 saves its current weights (--save). The
// Ctrl-C comes once the first epoch's line is out: a second after the start-up line, as the GPU
// Hogwild ranks' test once did (90f2c10), `make test` on a loaded machine once stopped the job
// with nothing saved.
Test(mpi_gpu, dataparallel_ctrl_c_on_mpirun_saves_rank_0s_gpu_checkpoint) {
    need_mpirun_and_gpus(2, "2 GPU ranks on one host");
    char *data = e2e_synth_n("data", 77, 20000, 200);
    char *ckpt = e2e_path("interrupted.safetensors");
    e2e_run_result r;
    mpi_start_for_ctrl_c(
        &r, (const char *const[]){"-np", "2", "HW", "--mode", "dataparallel", "--device", "cuda", "--replicas", "1",
                                  "--model", e2e.mlp, "--data", data, "--epochs", "1000", "--save", ckpt, NULL});
    expect_ctrl_c_saves_rank_0(&r, "epoch 1/", data, ckpt);
}
