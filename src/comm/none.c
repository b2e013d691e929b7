// none: the calls of include/hw/comm.h in a build without MPI (make MPI=0, or no Open MPI found).
// A plain run never calls them; a run started by mpirun with several ranks is refused in main.c
// before it gets here, naming the build.
#include "hw/comm.h"

#include "hw/err.h"

int hw_comm_built(void) { return 0; }

static int no_mpi(void) { return hw_fail("this hogwild was built without MPI (make MPI=0, or no Open MPI found)"); }

int hw_comm_init(const hw_world *world) {
    (void)world;
    return no_mpi();
}
void hw_comm_finalize(void) {}
void hw_comm_abort(int code) { (void)code; }
int hw_comm_sum(float *buf, size_t n) {
    (void)buf;
    (void)n;
    return no_mpi();
}
int hw_comm_min_int(int *value) {
    (void)value;
    return no_mpi();
}
int hw_comm_weights_agree(const float *weights, size_t n, const char *when) {
    (void)weights;
    (void)n;
    (void)when;
    return no_mpi();
}
int hw_couple_open(hw_couple **couple, float *live, size_t n, const hw_couple_plan *plan, const hw_world *world) {
    (void)live;
    (void)n;
    (void)plan;
    (void)world;
    *couple = 0;
    return no_mpi();
}
int hw_couple_poll(hw_couple *couple, int at_barrier, int64_t samples, double loss_sum) {
    (void)couple;
    (void)at_barrier;
    (void)samples;
    (void)loss_sum;
    return no_mpi();
}
int hw_couple_epoch_agreed(hw_couple *couple, const char *when, int *agreed) {
    (void)couple;
    (void)when;
    *agreed = 0;
    return no_mpi();
}
void hw_couple_view_read(const hw_couple *couple, hw_couple_view *view) {
    (void)couple;
    *view = (hw_couple_view){0, 0};
}
void hw_couple_report(const hw_couple *couple, char *text, size_t cap) {
    (void)couple;
    if (cap) text[0] = '\0';
}
void hw_couple_close(hw_couple *couple) { (void)couple; }
