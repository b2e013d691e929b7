// comm_mpi: the MPI side of src/comm/ (private to src/comm/).
//
// world.c, reduce.c and couple.c call MPI; in an MPI build they are libhogwild-mpi.so, beside the
// hogwild binary, which door.c loads with dlopen() only when the process is a rank of a job of
// several: a plain run maps no MPI library. They implement include/hw/comm.h's calls under the
// names below, gathered in one table, hw_mpi_ops (ops.c), which is all door.c looks up.
#ifndef HW_COMM_MPI_H
#define HW_COMM_MPI_H

#include "hw/comm.h"

typedef struct {
    int (*init)(const hw_world *world);
    void (*finalize)(void);
    void (*abort)(int code);
    int (*sum)(float *buf, size_t n, double timeout_s);
    int (*min_int)(int *value);
    int (*weights_agree)(const float *weights, size_t n, const char *when);
    int (*bcast)(void *buf, size_t bytes, int root);
    int (*couple_open)(hw_couple **couple, float *live, size_t n, const hw_couple_plan *plan, const hw_world *world);
    int (*couple_poll)(hw_couple *couple, int at_barrier, int64_t samples, double loss_sum);
    int (*couple_epoch_agreed)(hw_couple *couple, const char *when, int *agreed);
    void (*couple_view_read)(const hw_couple *couple, hw_couple_view *view);
    double (*couple_wait)(const hw_couple *couple);
    void (*couple_report)(const hw_couple *couple, char *text, size_t cap);
    void (*couple_close)(hw_couple *couple);
} comm_ops;

// The table of the MPI side, the one symbol door.c looks up in the plugin.
extern const comm_ops hw_mpi_ops;

// Sets the message "rank R: <what> failed: <MPI's text for code>" and returns HW_ERR.
int comm_mpi_failed(int code, const char *what);

// world.c
int comm_mpi_init(const hw_world *world);
void comm_mpi_finalize(void);
void comm_mpi_abort(int code);
// reduce.c
int comm_mpi_sum(float *buf, size_t n, double timeout_s);
int comm_mpi_min_int(int *value);
int comm_mpi_weights_agree(const float *weights, size_t n, const char *when);
int comm_mpi_bcast(void *buf, size_t bytes, int root);
// The same for Hogwild's coupling: an error after timeout_s seconds (0: none), so that a rank stuck
// or gone cannot hang the others, or as soon as a stop signal comes (the rank then saves).
int comm_mpi_weights_agree_within(const float *weights, size_t n, const char *when, double timeout_s);
// couple.c
int comm_mpi_couple_open(hw_couple **couple, float *live, size_t n, const hw_couple_plan *plan, const hw_world *world);
int comm_mpi_couple_poll(hw_couple *couple, int at_barrier, int64_t samples, double loss_sum);
int comm_mpi_couple_epoch_agreed(hw_couple *couple, const char *when, int *agreed);
void comm_mpi_couple_view_read(const hw_couple *couple, hw_couple_view *view);
double comm_mpi_couple_wait(const hw_couple *couple);
void comm_mpi_couple_report(const hw_couple *couple, char *text, size_t cap);
void comm_mpi_couple_close(hw_couple *couple);

#endif
