// mpi_plugin: the core's one way into MPI (include/hw/comm.h).
//
// In an MPI build the MPI side (src/comm/mpi/, private header mpi_side.h) is a separate object,
// libhogwild-mpi.so beside the hogwild binary, entered through its entry table (hw_mpi_plugin) with
// hw_plugin_entry by hw_comm_init, which only a rank of a job of several calls: a plain run maps no
// MPI library and pays nothing for it at start-up (linked in, Open MPI's libraries cost ~7 ms per
// start here). The plugin's calls into the core (hw_fail) resolve to the executable's own symbols
// (./hogwild exports the hw_ ones the plugins call). A binary that links the MPI side itself (the
// test binary) enters the same table without loading anything: the weak reference below is set.
//
// Without MPI (make MPI=0, or no Open MPI found) every call fails naming the build; the command
// line refuses a job of several ranks before any of them.
#include "hw/comm.h"

#include "comm/mpi/mpi_side.h"
#include "hw/err.h"

#ifdef HW_HAVE_MPI
#include "hw/plugin.h"

#include <dlfcn.h>

extern const comm_ops hw_mpi_plugin __attribute__((weak));

static const comm_ops *ops;  // set by hw_comm_init; NULL before: MPI is not in use

int hw_comm_built(void) { return 1; }

// The table of the plugin beside this executable; NULL after hw_fail naming the path. RTLD_GLOBAL:
// Open MPI loads components of its own that expect libmpi's symbols to be global. Never unloaded:
// MPI cannot be initialised twice in a process anyway.
static const comm_ops *load_ops(void) {
    return hw_plugin_entry("libhogwild-mpi.so", "MPI part", "Open MPI", RTLD_NOW | RTLD_GLOBAL, "hw_mpi_plugin",
                           &hw_mpi_plugin);
}

int hw_comm_init(const hw_world *world, double timeout_s) {
    if (!ops && !(ops = load_ops())) return HW_ERR;
    return ops->init(world, timeout_s);
}

#else

static const comm_ops *ops;  // always NULL: no MPI in this build

int hw_comm_built(void) { return 0; }

int hw_comm_init(const hw_world *world, double timeout_s) {
    (void)timeout_s;
    return hw_fail("rank %d of %d: this hogwild was built without MPI (make MPI=0, or no Open MPI found)", world->rank,
                   world->size);
}

#endif

// Every other call needs hw_comm_init first.
static int not_initialised(void) { return hw_fail("MPI is not initialised (hw_comm_init was not called or failed)"); }

void hw_comm_finalize(void) {
    if (ops) ops->finalize();
}

void hw_comm_abort(int code) {
    if (ops) ops->abort(code);
}

int hw_comm_settings_agree(const hw_comm_setting *settings, int n) {
    return ops ? ops->settings_agree(settings, n) : not_initialised();
}

int hw_comm_sum(float *buf, size_t n, double timeout_s) {
    return ops ? ops->sum(buf, n, timeout_s) : not_initialised();
}

int hw_comm_sum_polled(float *buf, size_t n, double timeout_s, const char *what) {
    return ops ? ops->sum_polled(buf, n, timeout_s, what) : not_initialised();
}

int hw_comm_min_int(int *value) { return ops ? ops->min_int(value) : not_initialised(); }

int hw_comm_weights_agree(const float *weights, size_t n, const char *when) {
    return ops ? ops->weights_agree(weights, n, when) : not_initialised();
}

int hw_comm_bcast(void *buf, size_t bytes, int root) { return ops ? ops->bcast(buf, bytes, root) : not_initialised(); }

int hw_couple_open(hw_couple **couple, float *live, size_t n, const hw_couple_plan *plan, const hw_world *world) {
    *couple = NULL;
    return ops ? ops->couple_open(couple, live, n, plan, world) : not_initialised();
}

int hw_couple_poll(hw_couple *couple, int state, int64_t samples, double loss_sum) {
    return ops ? ops->couple_poll(couple, state, samples, loss_sum) : not_initialised();
}

int hw_couple_epoch_agreed(hw_couple *couple, const char *when, int *agreed) {
    *agreed = 0;
    return ops ? ops->couple_epoch_agreed(couple, when, agreed) : not_initialised();
}

void hw_couple_view_read(const hw_couple *couple, hw_couple_view *view) {
    if (ops) ops->couple_view_read(couple, view);
    else *view = (hw_couple_view){0};
}

void hw_couple_weights(const hw_couple *couple, float *weights) {
    if (ops) ops->couple_weights(couple, weights);
}

double hw_couple_wait(const hw_couple *couple) { return ops ? ops->couple_wait(couple) : 0.01; }

void hw_couple_report(const hw_couple *couple, char *text, size_t cap) {
    if (ops) ops->couple_report(couple, text, cap);
    else if (cap) text[0] = '\0';
}

void hw_couple_close(hw_couple *couple) {
    if (ops && couple) ops->couple_close(couple);
}
