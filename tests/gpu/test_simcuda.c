// Tests of the simulated CUDA device itself (tests/simcuda/, `make sim`): that it refuses the
// misuse a GPU would punish, so that the GPU suites passing on it mean something. They run only on
// the simulated device (anywhere else they skip: a real GPU does not report misuse this way), and
// each sends the refusals it provokes to a file of its own instead of make sim's log.
#include "cuda/layer_ops.h"  // and the device, memory and streams (cuda/device.h)
#include "hw/err.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const hw_device CUDA0 = {HW_DEVICE_CUDA, 0};
static char refusals[64];

// Skips unless cuda:0 is the simulated device; the refusals of this test go to their own file.
static void need_simulator(void) {
    snprintf(refusals, sizeof refusals, "/tmp/hw-simcuda-test-%d.log", (int)getpid());
    unlink(refusals);
    setenv("HW_SIM_REFUSALS", refusals, 1);
    char name[256];
    if (hw_cuda_describe(CUDA0, name, sizeof name) != HW_OK || !strstr(name, "simulated")) {
        cr_skip_test("not the simulated CUDA device (make sim runs these)");
    }
}

// The refusals this test provoked, "" when none.
static const char *refused(void) {
    static char text[4096];
    text[0] = '\0';
    FILE *file = fopen(refusals, "r");
    if (!file) return text;
    size_t got = fread(text, 1, sizeof text - 1, file);
    text[got] = '\0';
    fclose(file);
    return text;
}

static void done(void) { unlink(refusals); }

#define OK(call) cr_assert_eq((call), HW_OK, "%s: %s", #call, hw_error())

Test(simcuda, copies_must_match_where_the_memory_is) {
    need_simulator();
    float host[16] = {0}, other[16] = {0}, *dev = NULL;
    OK(hw_cuda_malloc((void **)&dev, sizeof host));
    OK(hw_cuda_memcpy_h2d(dev, host, sizeof host, NULL));
    cr_expect_eq(hw_cuda_memcpy_h2d(other, host, sizeof host, NULL), HW_ERR, "host to host as HostToDevice");
    cr_expect(strstr(hw_error(), "HostToDevice copy") != NULL, "%s", hw_error());
    cr_expect_eq(hw_cuda_memcpy_d2h(host, dev, 2 * sizeof host, NULL), HW_ERR, "past the allocation's end");
    cr_expect(strstr(hw_error(), "run past its end") != NULL, "%s", hw_error());
    cr_expect_eq(hw_cuda_ipc_export(dev + 1, &(hw_cuda_ipc_handle){{0}}), HW_ERR, "not an allocation's start");
    hw_cuda_ipc_handle handle;
    OK(hw_cuda_ipc_export(dev, &handle));
    void *opened = NULL;
    cr_expect_eq(hw_cuda_ipc_open(&handle, &opened), HW_ERR, "a process opening its own handle");
    hw_cuda_free(host);  // not the simulator's: refused, though hw_cuda_free ignores the error
    cr_expect(strstr(refused(), "refused cudaFree") != NULL, "refusals: %s", refused());
    hw_cuda_free(dev);
    done();
}

Test(simcuda, a_child_forked_after_cuda_started_cannot_use_it) {
    need_simulator();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) _exit(hw_cuda_select(CUDA0) == HW_ERR && strstr(hw_error(), "forked") ? 0 : 1);
    int status = 0;
    waitpid(pid, &status, 0);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child could use CUDA (status %d)", status);
    done();
}

Test(simcuda, work_of_two_streams_must_be_ordered) {
    need_simulator();
    enum { N = 64 };
    float host[N] = {0}, *a = NULL, *b = NULL;
    hw_cuda_stream copy, compute;
    hw_cuda_event copied;
    OK(hw_cuda_malloc((void **)&a, sizeof host));
    OK(hw_cuda_malloc((void **)&b, sizeof host));
    OK(hw_cuda_stream_create(&copy));
    OK(hw_cuda_stream_create(&compute));
    OK(hw_cuda_event_create(&copied, 0));
    OK(hw_cuda_memcpy_h2d(a, host, sizeof host, copy));
    cr_expect_eq(hw_cuda_relu_forward(compute, b, a, N), HW_ERR, "read before the copy stream's write is ordered");
    cr_expect(strstr(hw_error(), "nothing orders the two") != NULL, "%s", hw_error());
    OK(hw_cuda_event_record(copied, copy));
    OK(hw_cuda_stream_wait_event(compute, copied));
    OK(hw_cuda_relu_forward(compute, b, a, N));  // ordered now
    OK(hw_cuda_stream_sync(compute));
    OK(hw_cuda_memcpy_h2d(a, host, sizeof host, copy));  // after the host waited for compute's read
    hw_cuda_event_destroy(copied);
    hw_cuda_stream_destroy(copy);
    hw_cuda_stream_destroy(compute);
    hw_cuda_free(a);
    hw_cuda_free(b);
    done();
}

Test(simcuda, pinned_memory_waits_for_its_copies) {
    need_simulator();
    enum { N = 64 };
    float *pinned = NULL, *dev = NULL;
    hw_cuda_stream stream;
    OK(hw_cuda_host_alloc((void **)&pinned, N * sizeof(float)));
    OK(hw_cuda_malloc((void **)&dev, N * sizeof(float)));
    OK(hw_cuda_stream_create(&stream));
    for (int i = 0; i < N; i++) pinned[i] = (float)i;
    OK(hw_cuda_memcpy_h2d(dev, pinned, N * sizeof(float), stream));
    pinned[3] = -1.0f;  // before the copy was waited for
    OK(hw_cuda_stream_sync(stream));
    cr_expect(strstr(refused(), "before it waited for that copy") != NULL, "refusals: %s", refused());
    // A device-to-host result read before the wait: the read crashes, saying why.
    OK(hw_cuda_memcpy_d2h(pinned, dev, N * sizeof(float), stream));
    pid_t pid = fork();  // the child makes no CUDA call: it only reads the held destination
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        volatile float early = pinned[0];  // no wait: the copy may not have run
        (void)early;
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "the early read did not crash (status %d)", status);
    cr_expect(strstr(refused(), "refused a host access") != NULL, "refusals: %s", refused());
    // A SIGSEGV sent by another process (kill -SEGV on a worker) is no fault of a held copy: it
    // ends the process at once, as without the simulator, instead of being swallowed once.
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        kill(getpid(), SIGSEGV);
        _exit(0);
    }
    waitpid(pid, &status, 0);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "a sent SIGSEGV was survived (status %d)", status);
    OK(hw_cuda_stream_sync(stream));
    cr_expect_eq(pinned[5], 5.0f, "after the wait the copy has landed: %g", (double)pinned[5]);
    hw_cuda_stream_destroy(stream);
    hw_cuda_host_free(pinned);
    hw_cuda_free(dev);
    done();
}
